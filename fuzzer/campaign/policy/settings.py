"""Known root causes a converter's setting avoids: an exporter that gives an operator a type its ONNX schema takes only
from a later opset (the dynamo exporter's bfloat16 below opset 22) fails every graph holding that type, whatever the
operators, and (operator, dtype) demotion never narrows to it. Once such a root cause is hit often, a test of that
converter on a graph holding the type is exported at the opset that allows it (with the demotion's probability, drawn
from the seed), or, where the converter exports no such opset, skipped as a known failure; the rest of the graph is
then tested rather than stopped at its first known defect, and the budget goes to what is new.

A skip loses the converter's every test of a graph holding the type, though the root cause is often one operator's
(the dynamo exporter's bfloat16 SplitToSequence below opset 24): so it is taken only where most of those tests hit
the bug (spread.MIN_TRAIT_PRECISION, as for a trait). An imprecise one raises the opset where the converter can and
leaves the rest to the signature's own demotion (culprit cuts, covers).

The demotion travels as a Demotion whose pair is (SETTING, "<converter>|<dtype>|<opset>"), with RAISE_ONLY appended
to the detail where it may not skip."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from fuzzer.campaign.policy.novelty import RAISE_ONLY, SETTING
from fuzzer.converters.base import Converter
from fuzzer.converters.runtime import ORT_TYPE_TO_IR
from fuzzer.converters.schema import noted_type
from fuzzer.converters.upstream import starts_upstream, upstream_opsets
from fuzzer.support.chance import seeded_chance
from generators.ir import Graph

SKIPPED = "skipped-known-root-cause"


def setting_detail(converter: str, message: str) -> str | None:
    """'torch-onnx-dynamo|bfloat16|22' for a bug whose message says the type is allowed from a later opset."""
    noted = noted_type(message)
    if noted is None or noted[0] not in ORT_TYPE_TO_IR:
        return None
    return f"{converter}|{ORT_TYPE_TO_IR[noted[0]]}|{noted[1]}"


def settled_options(converter: Converter, options: Mapping[str, Any], graph: Graph | None, seed: int,
                    demoted: Iterable[tuple[str, str, float]]) -> tuple[dict[str, Any], str | None]:
    """`options` with the opset raised where a demoted setting of this converter applies to `graph`, and the reason
    to skip the test where the converter exports no opset that allows the type (else None)."""
    options = dict(options)
    if graph is None or "opset" not in options:
        return options, None
    dtypes = {t.dtype.value for t in graph.types.values()}
    # An ONNX tool exports through its upstream: the upstream's setting is the one at fault, at its opsets.
    exporter = options.get("upstream", converter.name)
    high = upstream_opsets(exporter)[1] if "upstream" in options else converter.options_type.opset_range[1]
    for name, dtype, opset, may_skip in drawn_settings(seed, demoted):
        if name != exporter or dtype not in dtypes or options["opset"] >= opset:
            continue
        if opset > high and not may_skip:
            continue
        if opset > high:
            return options, (f"a known root cause: {name} gives {dtype} to an operator below opset {opset}, which it "
                             f"cannot export (it exports up to {high})")
        options["opset"] = opset
    return options, None


def drawn_settings(seed: int, demoted: Iterable[tuple[str, str, float]]) -> Iterator[tuple[str, str, int, bool]]:
    """(converter, dtype, opset, whether it may skip a test no opset allows) of each demoted setting that applies to
    the tests of `seed`, drawn with its demotion's probability."""
    for kind, detail, chance in demoted:
        if kind == SETTING and seeded_chance(f"setting:{seed}:{detail.removesuffix('|' + RAISE_ONLY)}") < chance:
            name, dtype, opset, *rest = detail.split("|")
            yield name, dtype, int(opset), rest != [RAISE_ONLY]


def unexportable_dtypes(converters: Sequence[Converter], seed: int,
                        demoted: Iterable[tuple[str, str, float]]) -> frozenset[str]:
    """The dtypes for which every one of `converters` would skip the graph of `seed` as a known root cause (its
    demoted setting needs an opset it cannot export): a graph holding one would be generated for nothing, so it is
    generated without them."""
    skipped: list[set[str]] = [set() for _ in converters]
    for name, dtype, opset, may_skip in drawn_settings(seed, demoted):
        for found, converter in zip(skipped, converters):
            # An ONNX tool exports through an upstream drawn per test: its skip is never certain here.
            if (may_skip and converter.name == name and not starts_upstream(converter)
                    and opset > converter.options_type.opset_range[1]):
                found.add(dtype)
    return frozenset(set.intersection(*skipped)) if skipped else frozenset()
