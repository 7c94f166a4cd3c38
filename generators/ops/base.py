"""What an operator spec is: dtypes, ranks, a z3 shape rule with requirements, its PyTorch call and source.

An op is a small class, and everything about the operator lives on it. The generator hands `build` symbolic
input tensors (z3 integer dims) and a `BuildContext` for attributes and weights; `build` returns symbolic
outputs, the z3 requirements that make the call valid, and the attributes. `forward` is the PyTorch code a
model author would write, called with concrete attributes; `torch_source` writes that same call as plain
PyTorch source (repro.py); `discontinuity` names where its output jumps (the oracle's labels);
`domain_loss` steers the input search away from NaN/Inf; `to_onnx` writes its ONNX counterpart, where ONNX has
one (generators/onnx_native.py builds whole graphs from them).
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

import numpy as np
import onnx
import torch
import z3

from generators.dtypes import INTS, DType
from generators.ops.discontinuity import Closeness, Detector
from generators.ops.onnx_nodes import OLDEST_OPSET, OnnxCall, elementwise
from generators.ops.tf_sources import TF_FLOATS, from_template
from generators.terms import broadcast_dim, mul

Dim = z3.ArithRef
AttrMap = Mapping[str, Any]
NEAR = Closeness()  # how close to a discontinuity an input counts as on it


class OpBug(RuntimeError):
    """An operator spec broke its own contract: a bug in convsmith, never retried silently."""


@dataclass(frozen=True)
class SymTensor:
    """A tensor whose dims are z3 integer expressions."""

    shape: tuple[Dim, ...]
    dtype: DType

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Sig:
    """One accepted combination of input dtypes (data inputs only) and the dtype of the first output."""

    ins: tuple[DType, ...]
    out: DType

    @property
    def key_dtype(self) -> DType:
        """The dtype an (operator, dtype) pair names this signature by: its first input's, else its output's."""
        return self.ins[0] if self.ins else self.out


@dataclass
class Build:
    """What `build` returns: outputs, the requirements that make the op valid, and attributes.

    Attribute values may be Python scalars/strings, z3 integer expressions (solved later), or tuples of them.
    """

    outputs: list[SymTensor]
    requires: list[z3.BoolRef] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)


class BuildContext(Protocol):
    """The generator's side of `build`: randomness, symbolic attributes, weights."""

    rng: Any  # random.Random

    def int_attr(self, name: str, lo: int, hi: int) -> Dim:
        """A symbolic integer attribute in [lo, hi]; the generator spreads its value over the range."""

    def choice(self, name: str, options: Sequence[Any]) -> Any:
        """A categorical attribute picked from `options` with the graph's seeded rng (`name` documents it)."""

    def weight(self, rank: int, dtype: DType, lo: Any = None, hi: Any = None) -> SymTensor:
        """A fresh weight tensor, appended to the node's inputs after the data inputs.

        `lo`/`hi` (numbers or z3 expressions, inclusive) bound its values, e.g. indices into a dim.
        """

    def dim(self) -> Dim:
        """A fresh positive dimension bounded like every other dim."""


class OpSpec:
    """Base class of every operator. Subclasses set the class attributes and implement `build`/`forward`."""

    name: ClassVar[str]
    family: ClassVar[str]
    sigs: ClassVar[tuple[Sig, ...]]
    # Allowed ranks per data input.
    ranks: ClassVar[tuple[tuple[int, ...], ...]]
    # Interval the first output's values always lie in, whatever the inputs (None: unknown or unbounded).
    value_range: ClassVar[tuple[float, float] | None] = None
    # Per data input, the interval its values must lie in (None: anything). The generator never feeds an input
    # from a tensor whose value_range is disjoint from it: no input search could rescue log(-abs(x)).
    input_domain: ClassVar[tuple[tuple[float, float] | None, ...]] = ()
    # The first output can hold exact zeros the input search cannot remove (padding, masks, floor of small
    # values, argmax indices); such a tensor never feeds an input that must be nonzero.
    emits_zeros: ClassVar[bool] = False
    # Data inputs (by position) that must hold no zero besides those an input_domain excludes (divisors).
    nonzero_inputs: ClassVar[tuple[int, ...]] = ()
    # Output values are some of the input values (reshapes, gathers, max-pool, linear resizes): known value
    # ranges and exact zeros carry over.
    preserves_values: ClassVar[bool] = False
    # A zero input element gives a zero output element (x * y, sin, sqrt): exact zeros carry over.
    keeps_zeros: ClassVar[bool] = False
    # Normalizations: some output element has magnitude >= 1 whatever the input, so the output can never
    # fit a narrow domain such as asin's (-1, 1).
    unit_scale: ClassVar[bool] = False
    # Where the output jumps for a tiny change of the input (rounding ties, branch cuts, comparison ties):
    # the oracle labels divergences on such inputs. None: the op is continuous.
    discontinuity: ClassVar[Detector | None] = None
    # Part of an output is unspecified (an order, which of tied elements): `canonical_output` settles it from the
    # op's input values, which the oracle computes only for such ops.
    settles_output: ClassVar[bool] = False
    # Float attributes that formats store as float32 (ONNX's float attributes, such as LayerNormalization's
    # epsilon): a float64 result may carry their rounding, so the oracle also accepts a reference computed so.
    float32_attrs: ClassVar[tuple[str, ...]] = ()
    # forward can return a tuple holding one output (a one-piece split or unbind): the repro renderer unpacks it.
    returns_sequence: ClassVar[bool] = False
    # The ONNX operator at the heart of what the op is written as, by its counterpart and by the exporters alike
    # (Conv for every convolution and conv pattern): a bug of that ONNX operator in one dtype hits every such op, so
    # the graph trait 'onnx-core:<op>:<dtype>' (fuzzer/campaign/traits.py) names it. None: no one operator is.
    onnx_core: ClassVar[str | None] = None
    # The first opset at which the op has an ONNX counterpart (`onnx_nodes`); None: it has none.
    onnx_since: ClassVar[int | None] = None
    # The dtypes (of the first input, else the output) whose counterpart ONNX Runtime's CPU kernels run at every
    # opset from onnx_since: the others have no counterpart a baseline could run.
    onnx_types: ClassVar[frozenset[DType]] = frozenset()
    # Dtypes torch eager runs the op for that `sigs` leaves out on purpose, each with the reason why
    # (tests/test_eager_dtypes.py holds `sigs` and these together to what eager accepts).
    dtype_exclusions: ClassVar[Mapping[DType, str]] = MappingProxyType({})
    # The dtypes (of the first input, else the output) whose `tf_source` TensorFlow's CPU kernels run, and
    # compute as `forward` does.
    tf_types: ClassVar[frozenset[DType]] = TF_FLOATS
    # The TensorFlow function computing the op, or a template over {x}, {y}, {z} and the attributes
    # (tf_sources.from_template), which the default `tf_source` fills; None: a class writes `tf_source` or has none.
    tf_fn: ClassVar[str | None] = None

    def needs_nonzero(self, index: int) -> bool:
        """Whether data input `index` must be free of zeros."""
        domain = self.input_domain[index] if index < len(self.input_domain) else None
        excludes_zero = domain is not None and (domain[0] >= 0 or domain[1] <= 0)
        return excludes_zero or index in self.nonzero_inputs

    @property
    def arity(self) -> int:
        return len(self.ranks)

    def build(self, ctx: BuildContext, *xs: SymTensor) -> Build:
        raise NotImplementedError

    def forward(self, attrs: AttrMap, *xs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        raise NotImplementedError

    def description(self) -> str:
        """What a report says the operator is, beside its name ("" where the name says it)."""
        return ""

    def features(self, attrs: AttrMap, ranks: Sequence[int]) -> tuple[str, ...]:
        """What this call asks of a converter beyond its operator and dtype, as names shared by every operator that
        asks it (e.g. 'pad:circular:rank3:dims2'), for the campaign to name as a bug's culprit and the generator to
        leave out. Read from the attribute choices and the data inputs' `ranks`, so that `attrs` may still hold
        z3 terms."""
        return ()

    def domain_loss(self, attrs: AttrMap, *xs: torch.Tensor) -> torch.Tensor | None:
        """A non-negative differentiable penalty that is zero when inputs are inside the op's domain."""
        return None

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        """This call as one plain-PyTorch expression over the variables `args` (data inputs, then weights),
        for repro.py: it must compute what `forward` computes, bit for bit, with only `torch` imported."""
        raise NotImplementedError(f"operator {self.name} does not write its PyTorch source")

    def tf_source(self, attrs: AttrMap, args: Sequence[str]) -> str | None:
        """This call as one plain TensorFlow expression over `args` (data inputs, then weights), with only `tf` and
        `np` in scope, dtype-generic (on float64 inputs it is the float64 twin); None where TensorFlow has none."""
        return from_template(self.tf_fn, args, attrs) if self.tf_fn else None

    def has_tf_source(self) -> bool:
        """Whether the operator writes a TensorFlow source (for some attributes, see `tf_source`)."""
        return self.tf_fn is not None or type(self).tf_source is not OpSpec.tf_source

    def tf_supports(self, attrs: AttrMap, in_dtypes: Sequence[DType]) -> bool:
        """Whether TensorFlow's CPU kernels run `tf_source` for these data input dtypes (the output's, for an op
        without data inputs), as `forward` computes."""
        return bool(in_dtypes) and in_dtypes[0] in self.tf_types

    def to_onnx(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        """The ONNX node(s) computing what `forward` computes (within the oracle's tolerance) for this node at
        `call.opset`, reading `call.inputs` and writing `call.outputs`; None where there is no such counterpart
        (no counterpart at all, an older opset, a dtype ONNX Runtime has no kernel for, an attribute ONNX cannot
        express)."""
        since = self.onnx_since
        if since is None or call.opset < max(since, OLDEST_OPSET) or call.dtype not in self.onnx_types:
            return None
        return self.onnx_nodes(attrs, call)

    def onnx_op_types(self, attrs: AttrMap, call: OnnxCall) -> tuple[str, ...]:
        """The ONNX operator types its counterpart is written with at `call.opset` (`Not`, `Where` for a where on a
        negated condition), past the dtype check; () where it has none."""
        if self.onnx_since is None:
            return ()
        try:
            nodes = self.onnx_nodes(attrs, call)
        except (KeyError, ValueError, TypeError, IndexError):  # an attribute the counterpart cannot write
            return ()
        return tuple(dict.fromkeys(n.op_type for n in nodes or ()))

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        """`to_onnx` past its checks of opset and dtype: append the node(s) to `call` and return `call.nodes`, or
        None where an attribute has no counterpart."""
        return None

    def canonical_output(self, attrs: AttrMap, index: int, value: np.ndarray,
                         inputs: Sequence[np.ndarray]) -> np.ndarray:
        """Output `index` with what torch leaves unspecified (an order, a tie-break) settled, so that two correct
        results compare equal; `inputs` are the op's input values (only for `settles_output` ops, else empty).
        The identity for an operator whose result is fully specified."""
        return value

    # Whether an integer overflow here excuses everything downstream of it (the wrapped value of an arithmetic
    # overflow feeds on, and the oracle cannot tell which later elements it reaches). False spares the real bugs
    # downstream of an overflow that happens on every other input (a left shift's): only its own elements are excused.
    overflow_spreads: ClassVar[bool] = True

    def widened_forward(self, attrs: AttrMap, *xs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """The operator on its integer inputs widened to float64 (what the oracle reads to tell an integer overflow):
        their exact result up to 2**53. Raises where it cannot take them so (an index, a bitwise operand)."""
        return self.forward(attrs, *(x.to(torch.float64) if _is_integer(x) else x for x in xs))

    def float32_rounded(self, attrs: AttrMap) -> dict[str, Any]:
        """`attrs` with the `float32_attrs` rounded to float32, as a format that stores them so computes."""
        return {k: float(np.float32(v)) if k in self.float32_attrs and isinstance(v, float) else v
                for k, v in attrs.items()}

    def discontinuities(self, attrs: AttrMap, inputs: Sequence[np.ndarray],
                        near: Closeness = NEAR) -> frozenset[str]:
        """Labels of the discontinuities these (numpy) input values sit on; empty for a continuous op."""
        detector = type(self).discontinuity  # read off the class: a plain function must not bind as a method
        arrays = [np.asarray(x) for x in inputs]
        if detector is None or not arrays or any(x.size == 0 for x in arrays):
            return frozenset()
        return frozenset(detector(arrays, attrs, near))

    def out_dtypes_for(self, ins: tuple[DType, ...]) -> list[Sig]:
        return [s for s in self.sigs if s.ins == ins]

    def __repr__(self) -> str:
        return f"<op {self.name}>"


class BroadcastBinary(OpSpec):
    """Two data inputs of one dtype broadcast together, computed by the class's `fn(a, b)`.

    The output keeps the inputs' dtype unless a subclass's `result_dtype` says otherwise (comparisons: bool).
    """

    ranks = ((0, 1, 2, 3, 4, 5), (0, 1, 2, 3, 4, 5))
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    # The ONNX operator computing `fn` with the same (multidirectional) broadcasting; None: none does.
    onnx_op: ClassVar[str | None] = None
    onnx_attrs: ClassVar[Mapping[str, Any]] = {}  # the attributes of that ONNX operator (Mod's fmod)

    def result_dtype(self, dtype: DType) -> DType:
        return dtype

    def build(self, ctx: BuildContext, a: SymTensor, b: SymTensor) -> Build:
        shape, reqs = broadcast(a.shape, b.shape)
        return Build([SymTensor(shape, self.result_dtype(a.dtype))], reqs)

    def forward(self, attrs: AttrMap, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return type(self).fn(a, b)

    def torch_source(self, attrs: AttrMap, args: Sequence[str]) -> str:
        return call(function_source(type(self).fn), args)

    def onnx_nodes(self, attrs: AttrMap, call: OnnxCall) -> list[onnx.NodeProto] | None:
        return elementwise(call, self.onnx_op, **self.onnx_attrs) if self.onnx_op else None


# ---- helpers shared by the families -------------------------------------------------------------

# Where `function_source` looks for the public name of a torch function, in order.
PUBLIC_MODULES = ("torch", "torch.nn.functional", "torch.special", "torch.linalg")
# The spelling a model author uses for convolutions, pools, norms and resizes (torch.conv2d is the same function).
FUNCTIONAL_FIRST = ("torch.nn.functional", "torch", "torch.special", "torch.linalg")


def function_source(fn: Callable[..., Any], modules: Sequence[str] = PUBLIC_MODULES) -> str:
    """'torch.log10' / 'torch.nn.functional.elu' for a public torch function: the first of `modules` that exports
    it (checked to be that very object)."""
    name = getattr(fn, "__name__", "")
    for module in modules:
        if name and getattr(importlib.import_module(module), name, None) is fn:
            return f"{module}.{name}"
    raise OpBug(f"{fn!r} is not a public torch function: write the op's torch_source by hand")


def functional_source(fn: Callable[..., Any]) -> str:
    """`function_source` preferring the torch.nn.functional spelling (convolutions, pools, norms, resizes)."""
    return function_source(fn, FUNCTIONAL_FIRST)


def literal(value: Any) -> str:
    """Python source for an attribute value: like repr, but inf and nan as float('inf') / float('nan')."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, tuple):
        return f"({', '.join(map(literal, value))}{',' if len(value) == 1 else ''})"
    if isinstance(value, list):
        return f"[{', '.join(map(literal, value))}]"
    return repr(value)


def call(qual: str, args: Sequence[str], *positional: Any, **kwargs: Any) -> str:
    """`qual(arg0, arg1, <positional literals>, key=<literal>, ...)`, keyword arguments in the given order."""
    parts = [*args, *map(literal, positional), *(f"{k}={literal(v)}" for k, v in kwargs.items())]
    return f"{qual}({', '.join(parts)})"


ANY_RANK: tuple[int, ...] = (0, 1, 2, 3, 4, 5)

# Reasons an operator leaves out a dtype torch eager runs it for (OpSpec.dtype_exclusions).
PROMOTES_TO_FLOAT = ("torch promotes the input to float32, which the float64 reference twin cannot widen: its "
                     "reference would be no more precise than the run it checks")
BOOL_PROMOTES_TO_INT = "torch promotes bool to int64 first: a cast followed by the int64 op, nothing of its own"
IDENTITY = "torch returns the input unchanged for this dtype: nothing is computed"
CONSTANT = "the result is a constant for this dtype: the input's values are never read"
NARROW_INT_PRODUCTS = ("sums of products overflow 8 bits at the smallest sizes, and ONNX's MatMul/Gemm have no 8-bit "
                       "types (MatMulInteger widens to int32)")
INT64_CPU_ONLY = ("torch has an int64 kernel on CPU only (none on CUDA) and ONNX's counterpart takes floats only: "
                  "no converter or device runs it")


def excluded(dtypes: Sequence[DType], reason: str) -> Mapping[DType, str]:
    """`dtype_exclusions` leaving out each of `dtypes` for one reason."""
    return MappingProxyType(dict.fromkeys(dtypes, reason))


INTS_PROMOTE = excluded((*INTS, DType.BOOL), PROMOTES_TO_FLOAT)  # float math: sin, exp, true division, ...


def same_sigs(dtypes: Sequence[DType], arity: int = 1, out: DType | None = None) -> tuple[Sig, ...]:
    """Signatures where every data input has the same dtype; output has it too unless `out` is given."""
    return tuple(Sig((d,) * arity, out if out is not None else d) for d in dtypes)


def numel(shape: Sequence[Dim]) -> Dim | int:
    if not shape:
        return 1
    total: Dim | int = shape[0]
    for d in shape[1:]:  # no leading `1 *`: every z3 term made in Python costs tens of microseconds
        total = mul(total, d)
    return total


def broadcast(a: Sequence[Dim], b: Sequence[Dim]) -> tuple[tuple[Dim, ...], list[z3.BoolRef]]:
    """NumPy broadcasting over symbolic dims: result shape and the requirements (equal or one is 1)."""
    rank = max(len(a), len(b))
    pa = [None] * (rank - len(a)) + list(a)
    pb = [None] * (rank - len(b)) + list(b)
    out: list[Dim] = []
    reqs: list[z3.BoolRef] = []
    for da, db in zip(pa, pb):
        if da is None:
            out.append(db)
        elif db is None:
            out.append(da)
        else:
            either, dim = broadcast_dim(da, db)
            reqs.append(either)
            out.append(dim)
    return tuple(out), reqs


def broadcast_where(cond: Sequence[Dim], a: Sequence[Dim], b: Sequence[Dim]
                    ) -> tuple[tuple[Dim, ...], list[z3.BoolRef]]:
    """torch.where's broadcasting: `a` with `b`, then `cond` with that; the shape and the requirements."""
    ab, reqs = broadcast(a, b)
    shape, more = broadcast(cond, ab)
    return shape, reqs + more


def norm_axis(axis: int, rank: int) -> int:
    return axis % rank if rank else 0


def pick_axis(ctx: BuildContext, n: int, name: str = "dim") -> int:
    """One of `n` axis positions, written negative a third of the time (converters mishandle those)."""
    axis = ctx.choice(name, range(n))
    return axis - n if ctx.choice(f"{name}_negative", (False, False, True)) else axis


def conv_out(size: Dim, kernel: Dim, stride: Dim, pad: Dim, dilation: Dim | int = 1) -> Dim:
    """floor((size + 2*pad - dilation*(kernel-1) - 1) / stride) + 1, as z3 integer division."""
    return (size + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1


def clamp_penalty(x: torch.Tensor, lo: float | None = None, hi: float | None = None) -> torch.Tensor:
    """Sum of how far float elements of `x` stray below lo or above hi (zero when inside)."""
    if not x.is_floating_point():
        return x.new_zeros((), dtype=torch.float32)
    x = x.float()
    loss = x.new_zeros(())
    if lo is not None:
        loss = loss + torch.relu(lo - x).sum()
    if hi is not None:
        loss = loss + torch.relu(x - hi).sum()
    return loss


def finite_max(dtype: DType) -> float:
    """The largest finite magnitude of a float dtype (used to keep intermediates from overflowing)."""
    if dtype is DType.FLOAT16:
        return 65504.0
    if dtype is DType.BFLOAT16:
        return 3.0e38
    return 3.0e38 if dtype is DType.FLOAT32 else 1.0e300


SAFE_EXP_ARG = math.log(60000.0)  # exp() stays finite even in float16 below this


def _is_integer(x: torch.Tensor) -> bool:
    return not x.is_floating_point() and not x.is_complex() and x.dtype is not torch.bool
