"""Every operator's dtype table against torch eager: what `sigs` declares runs, and what eager runs is declared or
excluded with a reason.

The probe, once per (operator, dtype):
- One instance of the op is generated (seed 0) at its base dtype, the first of BASE_PREFERENCE its sigs take
  (float32 where it can), and materialized; its data inputs hold the deterministic values 1, 2, 3, 1, ... (no zero
  divisor, inside every domain that matters for whether a kernel exists), its weights come from the seed.
- The varied inputs are the data inputs whose dtype differs between the op's sigs (where(cond, a, b) varies a and
  b, masked_fill(x, mask) varies x); an op with one dtype per input varies the inputs of its first input's dtype.
  Weights of the base dtype vary with them (conv's weight and bias); the others (int64 indices) stay as they are.
  Ops without data inputs vary nothing: their own sigs must run.
- For each dtype the catalogue knows, the varied inputs are cast to it and `forward` runs. A kernel error that
  says the dtype is unsupported (REFUSALS) means eager refuses it; any other error is a failure of the probe.
- A declared dtype that the base instance's attributes rule out (antialiased resizes have no float16 kernel, and the
  op never picks antialias for float16) gets a second chance: the op's own instance at that dtype.

The assertions: every declared dtype runs and gives the sig's output dtype; every dtype eager runs is declared or
in the op's `dtype_exclusions`; an exclusion is never declared and is a dtype eager runs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
import torch

from generators.dtypes import ALL, DType
from generators.generator import single_op_graph
from generators.ir import Graph
from generators.materialize import materialize
from generators.ops.base import OpSpec
from generators.registry import REGISTRY

BASE_PREFERENCE = (DType.FLOAT32, DType.FLOAT64, DType.INT32, DType.INT8, DType.UINT8, DType.INT64, DType.BOOL,
                   DType.FLOAT16, DType.BFLOAT16)
# What torch's kernels say when they have no implementation for a dtype.
REFUSALS = re.compile(r"not implemented for|not supported|does not support|only support|Expected a floating point"
                      r"|could not infer output dtype|cannot be converted to type|on an unsigned type"
                      r"|to have the same dtype|is no longer supported|to be floating point|expected scalar type")


@dataclass(frozen=True)
class Instance:
    """One node of the op, ready to run with its inputs cast: the base dtype, the inputs and which of them vary."""

    op: OpSpec
    graph: Graph
    base: DType
    inputs: tuple[torch.Tensor, ...]
    varied: frozenset[int]


def sig_dtype(op: OpSpec, sig_index: int = 0) -> DType:
    """The dtype a sig is known by: that of its first input (its output, for ops without inputs)."""
    sig = op.sigs[sig_index]
    return sig.ins[0] if sig.ins else sig.out


def varied_positions(op: OpSpec) -> frozenset[int]:
    """The data inputs the probe casts: those whose dtype differs between sigs, else those of the first's dtype."""
    arity = len(op.sigs[0].ins)
    differing = {i for i in range(arity) if len({s.ins[i] for s in op.sigs}) > 1}
    return frozenset(differing or {i for i in range(arity) if op.sigs[0].ins[i] is op.sigs[0].ins[0]})


def declared(op: OpSpec) -> dict[DType, DType]:
    """The output dtype each declared dtype of the varied inputs gives."""
    varied = sorted(varied_positions(op))
    for sig in op.sigs:
        assert len({sig.ins[i] for i in varied}) <= 1, f"{op.name}: varied inputs differ within {sig}"
    return {(sig.ins[varied[0]] if varied else sig.out): sig.out for sig in op.sigs}


def instance(op: OpSpec, dtype: DType) -> Instance | None:
    """A one-node graph of the op whose varied inputs have `dtype` (the first of seeds 0-31 that gives one), with the
    probe's input values; None when none is made."""
    varied = varied_positions(op)
    first = {sig_dtype(op, i) for i, sig in enumerate(op.sigs) if not varied or sig.ins[min(varied)] is dtype}
    for seed in range(32):
        graph = single_op_graph(op, min(first), seed)
        node = graph.nodes[0] if graph is not None else None
        if node is not None and (not varied or graph.types[node.inputs[min(varied)]].dtype is dtype):
            return Instance(op, graph, dtype, probe_inputs(graph), frozenset(varied | weights_of(op, graph, dtype)))
    return None


def probe_inputs(graph: Graph) -> tuple[torch.Tensor, ...]:
    """The node's inputs: data inputs hold 1, 2, 3, 1, ... in their dtype, weights come from seed 0."""
    module = materialize(graph, 0)
    inputs = []
    for name in graph.nodes[0].inputs:
        if name in graph.inputs:
            ttype = graph.inputs[name]
            count = torch.Size(ttype.shape).numel()
            inputs.append((torch.arange(count) % 3 + 1).reshape(ttype.shape).to(ttype.dtype.torch))
        else:
            inputs.append(getattr(module, name).detach())
    return tuple(inputs)


def weights_of(op: OpSpec, graph: Graph, dtype: DType) -> set[int]:
    """The positions of the node's weights that have the varied inputs' dtype (they vary with them); none for an op
    without data inputs."""
    node = graph.nodes[0]
    if not op.sigs[0].ins:
        return set()
    arity = len(op.sigs[0].ins)
    return {i for i in range(arity, len(node.inputs)) if graph.types[node.inputs[i]].dtype is dtype}


def run(inst: Instance, dtype: DType) -> DType | str:
    """The dtype of the first output when the varied inputs are cast to `dtype`, or torch's refusal."""
    args = [x.to(dtype.torch) if i in inst.varied else x for i, x in enumerate(inst.inputs)]
    try:
        with torch.no_grad():
            result = inst.op.forward(dict(inst.graph.nodes[0].attrs), *args)
    except (RuntimeError, NotImplementedError, TypeError) as error:
        message = str(error).splitlines()[0] if str(error) else type(error).__name__
        if REFUSALS.search(message) is None:
            raise AssertionError(f"{inst.op.name} on {dtype.value}: the probe broke: {message}") from error
        return message
    first = result[0] if isinstance(result, tuple | list) else result
    return DType.from_torch(first.dtype)


def mismatches(op: OpSpec) -> list[str]:
    """What is wrong with the op's dtype table, one line each (empty when it matches eager)."""
    table = declared(op)
    exclusions = dict(op.dtype_exclusions)
    base = next(d for d in BASE_PREFERENCE if d in table)
    inst = instance(op, base)
    if inst is None:
        return [f"{op.name}: no one-node graph at {base.value}"]
    problems = [f"{op.name} {d.value}: excluded ({why}) yet declared" for d, why in exclusions.items() if d in table]
    problems += [f"{op.name} {d.value}: excluded without a reason" for d, why in exclusions.items() if not why.strip()]
    for dtype in (ALL if inst.varied else tuple(table)):
        got = run(inst, dtype)
        if dtype in table and got != table[dtype]:
            own = instance(op, dtype)  # the base instance's attributes may not fit this dtype
            got = run(own, dtype) if own is not None else "no one-node graph at this dtype"
        if dtype in table and got != table[dtype]:
            problems.append(f"{op.name} {dtype.value}: declared -> {table[dtype].value}, eager: "
                            f"{got.value if isinstance(got, DType) else got}")
        elif dtype not in table and isinstance(got, DType) and dtype not in exclusions:
            problems.append(f"{op.name} {dtype.value}: eager runs it (-> {got.value}), neither declared nor excluded")
        elif dtype in exclusions and not isinstance(got, DType):
            problems.append(f"{op.name} {dtype.value}: excluded, but eager refuses it anyway: {got}")
    return problems


@pytest.mark.slow
def test_every_dtype_table_matches_what_torch_eager_runs() -> None:
    problems = [line for op in REGISTRY.values() for line in mismatches(op)]
    if problems:
        pytest.fail(f"{len(problems)} dtype table mismatches:\n" + "\n".join(problems), pytrace=False)


def test_probe_sees_an_undeclared_dtype_and_a_refused_one() -> None:
    """The probe itself: abs declares no bool (eager refuses it) and sub no bool (eager refuses `-` on bools)."""
    abs_op = REGISTRY["abs"]
    inst = instance(abs_op, DType.FLOAT32)
    assert inst is not None and inst.varied == {0}
    assert run(inst, DType.FLOAT32) is DType.FLOAT32
    assert isinstance(run(inst, DType.BOOL), str)
    assert run(inst, DType.INT8) is DType.INT8
    where = REGISTRY["where"]
    assert varied_positions(where) == {1, 2}
