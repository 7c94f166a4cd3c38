"""What each of ONNX Runtime's graph transformers matched, where its log says only which modified the graph. One
transformer fired: it matched every node of the received model that the optimized model no longer has. Several
fired: each is given the nodes that the optimized model lost but the model optimized with that transformer disabled
keeps (one more session per transformer fired); where disabling it keeps none (a transformer that changes shapes,
not nodes; one run after partitioning that `disabled_optimizers` does not reach; one whose work another redoes), it
is given no classes: coverage under-counts there rather than claim pairs it cannot show."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from fuzzer.converters.edge_classes import Match, class_names, match_labels
from fuzzer.converters.rewrite_matches import Fired, changed_matches, model_keys, node_key, typed

Without = Callable[[str], onnx.ModelProto | None]  # the model optimized with one transformer disabled
# Transformers no session without them tells apart, each given no classes without asking (a session per transformer
# fired cost 45 ms a test on float16 graphs, where these fire on every one): the float16 casts run after partitioning
# (`disabled_optimizers` does not reach them: disabled, every node changes as before), and the free-dimension
# override, which changes shapes, not nodes.
UNATTRIBUTABLE = frozenset({"CastFloat16Transformer", "RemoveDuplicateCastTransformer",
                            "FuseFp16InitializerToFp32NodeTransformer", "InsertCastTransformer", "MemcpyTransformer",
                            "FreeDimensionOverrideTransformer"})


def transformer_classes(names: tuple[str, ...], received: onnx.ModelProto, optimized: onnx.ModelProto,
                        without: Without) -> Fired:
    """`names` (the transformers that logged a change) each with the labels of the nodes it matched."""
    if not names:
        return Fired()
    changed = changed_matches(typed(received), model_keys(optimized))
    every = class_names(match_labels(changed))
    if len(names) == 1:
        return Fired(names, {names[0]: every})
    found = {}
    for name in names:
        alone = _own(changed, without(name)) if name not in UNATTRIBUTABLE else ()
        found[name] = class_names(match_labels(alone))
    return Fired(names, found)


def _own(changed: tuple[Match, ...], kept: onnx.ModelProto | None) -> tuple[Match, ...]:
    """Of the changed nodes, those the model optimized without the transformer keeps unchanged."""
    if kept is None:
        return ()
    keys = model_keys(kept)
    own = (Match(tuple(n for n in m.nodes if node_key(n) in keys), m.scope) for m in changed)
    return tuple(m for m in own if m.nodes)
