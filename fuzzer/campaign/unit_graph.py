"""What the campaign records of a unit's graph: the message that carries it from the worker (or, made ahead and
passed on as it is, from the feeder) and the (operator, dtype) pairs, the features and the traits it holds."""

from __future__ import annotations

from fuzzer.campaign.messages import UnitGraph
from fuzzer.campaign.policy.novelty import FEATURE
from fuzzer.campaign.policy.traits import TRAIT, graph_traits
from generators.ir import Graph
from generators.registry import REGISTRY, OpRegistry
from oracles.sequences import graph_sequences


def op_dtype_pairs(graph: Graph) -> set[tuple[str, str]]:
    """Each node's (operator, dtype) as the probe and the generator key it: its first input's dtype, else its
    output's."""
    return {(n.op, graph.types[(n.inputs or n.outputs)[0]].dtype.value) for n in graph.nodes}


def feature_pairs(graph: Graph, registry: OpRegistry = REGISTRY) -> set[tuple[str, str]]:
    """(FEATURE, feature) for each feature its nodes ask of a converter (OpSpec.features)."""
    return {(FEATURE, feature) for feature in registry.features(graph)}


def trait_pairs(graph: Graph) -> set[tuple[str, str]]:
    """(TRAIT, trait) for each trait the graph holds (traits.graph_traits)."""
    return {(TRAIT, trait) for trait in graph_traits(graph)}


def graph_message(idx: int, graph: Graph) -> UnitGraph:
    """The "graph" message of unit `idx`: the graph as JSON, its size, operator sequences and pairs."""
    return UnitGraph(idx, graph.to_json(), len(graph.nodes), tuple(sorted(graph_sequences(graph))),
                     tuple(sorted(op_dtype_pairs(graph) | feature_pairs(graph) | trait_pairs(graph))))
