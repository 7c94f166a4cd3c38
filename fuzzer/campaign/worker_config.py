"""What a worker needs to know, as JSON: generator options, converter options and the pairs to avoid, all drawn
from a seed so that the same config and seed always give the same test."""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fuzzer.campaign.policy.class_steering import steered_options, steered_target
from fuzzer.campaign.policy.novelty import Demotion, without_demoted
from fuzzer.campaign.policy.settings import unexportable_dtypes
from fuzzer.campaign.sources import SourceKind, unit_source
from fuzzer.campaign.unit_graph import op_dtype_pairs
from fuzzer.converters import DEFAULT_REGISTRY, load_registry
from fuzzer.converters.base import Converter
from fuzzer.converters.capabilities import expressible
from fuzzer.converters.upstream import (
    NATIVE,
    native_choice,
    native_seed,
    starts_upstream,
    upstream_default_opset,
    upstream_exporters,
)
from fuzzer.support.confine import DEFAULT_MEMORY_MB
from generators.dtypes import DType
from generators.generator import GenOptions, admits_an_operator
from generators.ir import Graph
from generators.onnx_native import native_gen_options
from generators.registry import REGISTRY as OPS
from generators.values import ValueStrategy, draw_strategy

# The share of graphs kept free of every pair a probed converter refuses, so that converter is tested too; the
# rest hold anything, and only the refusing converter's test is skipped.
SPARED_SHARE = 0.5
# Of a campaign's seeds (where it runs a converter whose framework cannot express every operator), those whose graph
# is generated from the operators one such converter expresses (capabilities.Expressing), so that it is tested: a
# random graph of every operator would seldom be one it can take.
EXPRESSIBLE_SEED_SHARE = 0.25


@dataclass(frozen=True)
class WorkerConfig:
    """Everything a worker needs, as JSON: the same config and seed always give the same results."""

    out_dir: str
    log_dir: str
    registry: str = DEFAULT_REGISTRY
    min_nodes: int = 2
    nodes: int = 10
    include_ops: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    max_numel: int = GenOptions.max_numel
    avoid_pairs: tuple[tuple[str, str], ...] = ()  # (op, dtype) never generated: no converter here takes them
    # Per converter, (op, dtype) its probe found unsupported: its test of a graph holding one is skipped.
    skip_pairs: Mapping[str, tuple[tuple[str, str], ...]] = dataclasses.field(default_factory=dict)
    converter_options: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    check: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    timeout_s: float = 60.0
    memory_mb: int = DEFAULT_MEMORY_MB
    device: str = "cpu"
    vary_settings: bool = False  # each test draws its converter's options (the pinned ones kept); else defaults
    prepare_ahead: bool = False  # a feeder process prepares the next unit while this one converts (CPU only)
    values: tuple[str, ...] = (ValueStrategy.UNIFORM.value,)  # the value strategies tests draw from
    demote_known: bool = False  # generate less of the (operator, dtype) pairs behind bugs hit often (novelty.py)
    # The campaign's converters: where one is an ONNX tool, a share of seeds make graphs for the native upstream.
    # Empty in configs written before it, whose seeds keep their graphs.
    converters: tuple[str, ...] = ()
    # What a unit tests (fuzzer/campaign/sources.py): a graph generated from its seed ("graphs"), a zoo architecture
    # the seed picks ("zoo", fuzzer/campaign/zoo_unit.py), or either ("mix": the zoo on zoo_share of seeds).
    source: str = SourceKind.GRAPHS.value
    zoo_share: float = 0.0
    # A zoo unit's hang timeout and memory in a mix, whose graph units keep timeout_s and memory_mb; None: theirs for
    # every unit. The worker's address space is the larger memory: one process runs both kinds of unit.
    zoo_timeout_s: float | None = None
    zoo_memory_mb: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WorkerConfig:
        hinted = {f.name: str(f.type) for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if hinted[k].startswith("tuple") else v for k, v in data.items() if k in hinted}
        if "skip_pairs" in values:
            values["skip_pairs"] = {c: tuple(tuple(p) for p in pairs) for c, pairs in values["skip_pairs"].items()}
        return cls(**values)

    def source_for(self, seed: int) -> SourceKind:
        """What the unit of `seed` tests: a graph or a zoo architecture."""
        return unit_source(self.source, self.zoo_share, seed)

    def limits_for(self, seed: int | None) -> tuple[float, int]:
        """The hang timeout of each test of the unit of `seed`, and the resident memory it may grow by (a unit not
        known, None: the graphs')."""
        zoo = seed is not None and self.source_for(seed) is SourceKind.ZOO
        timeout_s = self.zoo_timeout_s if zoo and self.zoo_timeout_s is not None else self.timeout_s
        memory_mb = self.zoo_memory_mb if zoo and self.zoo_memory_mb is not None else self.memory_mb
        return timeout_s, memory_mb

    @property
    def address_space_mb(self) -> int:
        """The worker process's address-space allowance beyond its start (0: unlimited): the larger of the two."""
        if self.memory_mb <= 0 or self.zoo_memory_mb is None:
            return self.memory_mb
        return max(self.memory_mb, self.zoo_memory_mb)

    def values_for(self, seed: int) -> ValueStrategy:
        """How the inputs of the test of `seed` are drawn (recorded with the unit and in its cases)."""
        return draw_strategy(seed, tuple(ValueStrategy(v) for v in self.values))

    def known_unsupported(self, graph: Graph, converter: str, options: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The graph's (op, dtype) pairs this converter, or the upstream exporter it starts from, does not take."""
        # Looked up in both sets, not in their union: a union copies hundreds of pairs for every test.
        own = self._skip_sets.get(converter, frozenset())
        upstream = self._skip_sets.get(options.get("upstream", ""), frozenset())
        if not own and not upstream:
            return []
        return sorted(pair for pair in op_dtype_pairs(graph) if pair in own or pair in upstream)

    def inexpressible(self, graph: Graph, converter: Converter, options: Mapping[str, Any]) -> list[str]:
        """The graph's operators that `converter`, or the upstream exporter it starts from, cannot express (its
        framework has no such operator): its test of the graph is never run."""
        upstream = load_registry(self.registry).get(options.get("upstream", ""))
        judges = [c for c in (converter, upstream) if c is not None]
        return sorted({n.op for n in graph.nodes if not all(expressible(c, OPS[n.op]) for c in judges)})

    @functools.cached_property
    def _skip_sets(self) -> dict[str, frozenset[tuple[str, str]]]:
        # Built once: the probe's lists hold hundreds of pairs, and a set of them per test cost 0.1 ms.
        return {name: frozenset(tuple(p) for p in pairs) for name, pairs in self.skip_pairs.items()}

    @functools.cached_property
    def _avoid_sets(self) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
        # The pairs never generated, without and with the probe's skipped ones: two sets for the whole campaign, so
        # the generator's operator table, cached on them, is built twice, not for every graph (~3 ms each).
        never = frozenset((op, dtype) for op, dtype in self.avoid_pairs)
        return never, never.union(*self._skip_sets.values())

    def gen_options(self, seed: int) -> GenOptions:
        """The generator options of one seed: the node count is drawn from [min_nodes, nodes] by the seed."""
        nodes = random.Random(seed).randint(min(self.min_nodes, self.nodes), self.nodes)
        dtypes = tuple(DType(d) for d in self.dtypes) or GenOptions.dtypes
        never, spared = self._avoid_sets
        avoid = spared if random.Random(f"avoid:{seed}").random() < SPARED_SHARE else never
        opts = GenOptions(nodes=nodes, include_ops=self.include_ops, exclude_ops=self.exclude_ops, dtypes=dtypes,
                          max_numel=self.max_numel, avoid_pairs=avoid)
        # A native seed of a campaign that runs an ONNX tool: its graph holds only operators (and dtypes) with an ONNX
        # counterpart, so its ONNX tools can start from the graph written straight to ONNX (options_for).
        if native_seed(seed) and any(starts_upstream(c) for c in self._campaign_converters):
            return native_gen_options(opts) or opts
        return self._narrowed(opts, seed)

    def unit_gen_options(self, seed: int, demoted: Sequence[Demotion] = ()) -> GenOptions:
        """The generator options of one seed under the campaign's demotions: demoted pairs left out, steered to the
        (rewrite, class) pair it is sent to where it is, and dtypes left out that every converter of the campaign
        would skip as a known root cause."""
        unsteered, target = without_demoted(self.gen_options(seed), seed, demoted), steered_target(seed, demoted)
        opts = unsteered
        if target is not None and not native_seed(seed):  # its ONNX tool starts from the native model (options_for)
            opts = native_gen_options(opts) or opts
        opts = steered_options(opts, target)
        if target is not None and not admits_an_operator(opts):
            opts = unsteered  # a target the campaign's demotions and dtypes leave no operator for: not steered
        skipped = unexportable_dtypes(self._campaign_converters, seed, demoted)
        kept = tuple(d for d in opts.dtypes if d.value not in skipped)
        if not (skipped and kept):
            return opts
        narrowed = dataclasses.replace(opts, dtypes=kept)
        return narrowed if admits_an_operator(narrowed) else opts

    def _narrowed(self, opts: GenOptions, seed: int) -> GenOptions:
        """On EXPRESSIBLE_SEED_SHARE of seeds, `opts` narrowed to the operators one of the campaign's narrower
        converters can express (which one: drawn by the seed)."""
        narrow = self._expressible_ops
        rng = random.Random(f"expressible:{seed}")
        if not narrow or rng.random() >= EXPRESSIBLE_SEED_SHARE:
            return opts
        ops = narrow[rng.choice(sorted(narrow))]
        allowed = tuple(op for op in ops if op in (opts.include_ops or ops) and op not in opts.exclude_ops)
        return dataclasses.replace(opts, include_ops=allowed, exclude_ops=()) if allowed else opts

    @functools.cached_property
    def _campaign_converters(self) -> tuple[Converter, ...]:
        # The campaign's converters from its registry: loaded once per worker, read for every graph.
        registry = load_registry(self.registry) if self.converters else {}
        return tuple(registry[name] for name in self.converters if name in registry)

    @functools.cached_property
    def _expressible_ops(self) -> dict[str, tuple[str, ...]]:
        # Per campaign converter that cannot express every operator, those it can: asked once per worker.
        found = {}
        for converter in self._campaign_converters:
            ops = tuple(op for op in OPS if expressible(converter, OPS[op]))
            if len(ops) < len(OPS):
                found[converter.name] = ops
        return found

    def options_for(self, converter: Converter, seed: int, graph: Graph | None = None,
                    demoted: Sequence[Demotion] = ()) -> dict[str, Any]:
        """The converter options of the test of `seed` under `converter`, as JSON (recorded with its result). An
        ONNX tool of a native seed, or of a unit steered to one of its (rewrite, class) pairs under `demoted`, starts
        from the native model of `graph` where one can be written (unless an upstream is pinned): the exporters never
        write what the steering asks for; one whose drawn exporter is known not to take `graph` starts from the other
        exporter."""
        pinned = self.converter_options.get(converter.name) or {}
        target = steered_target(seed, demoted)
        wanted = native_seed(seed) or (target is not None and target.converter == converter.name)
        native = (graph is not None and "upstream" not in pinned and starts_upstream(converter) and wanted
                  and native_choice(graph, pinned))
        if not self.vary_settings:
            return converter.options(native or pinned).to_json()
        if native:  # at an opset drawn among those the native model can be written at
            return converter.options_type.draw(seed, {**pinned, "upstream": NATIVE}, graph).to_json()
        options = converter.options_type.draw(seed, pinned, graph).to_json()
        upstream = options.get("upstream")
        if upstream is None or "upstream" in pinned or graph is None or not self._refuses(upstream, graph):
            return options
        return self._first_exporter(converter, seed, graph, pinned, (upstream,)) or options

    def upstream_after(self, converter: Converter, seed: int, graph: Graph, failed: Collection[str]
                       ) -> dict[str, Any] | None:
        """The options of `converter`'s test of `seed` starting from an upstream none of `failed` (whose exports of
        `graph` failed): the native model where one can be written, else the first exporter not known to refuse the
        graph; None where the upstream is pinned, settings are not drawn, or none is left."""
        pinned = self.converter_options.get(converter.name) or {}
        if "upstream" in pinned or not self.vary_settings:
            return None
        if NATIVE not in failed and native_choice(graph, pinned):
            return converter.options_type.draw(seed, {**pinned, "upstream": NATIVE}, graph).to_json()
        return self._first_exporter(converter, seed, graph, pinned, failed)

    def _first_exporter(self, converter: Converter, seed: int, graph: Graph, pinned: Mapping[str, Any],
                        excluded: Collection[str]) -> dict[str, Any] | None:
        """The options of `converter`'s test of `seed` from the first exporter, in registry order, neither
        `excluded` nor known to refuse `graph`, at its default opset (unless pinned); None where none is left."""
        for other in (c.name for c in upstream_exporters()):
            if other not in excluded and not self._refuses(other, graph):
                opset = pinned.get("opset", upstream_default_opset(other))
                return converter.options_type.draw(seed, {**pinned, "upstream": other, "opset": opset}).to_json()
        return None

    def _refuses(self, exporter: str, graph: Graph) -> bool:
        return bool(op_dtype_pairs(graph) & self._skip_sets.get(exporter, frozenset()))


def _plain(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value
