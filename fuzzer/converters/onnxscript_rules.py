"""Which steps of the dynamo exporter's optimizer (onnxscript's `optimize_ir`) change a model.

`ONNXProgram.optimize()` runs constant folding, onnxscript's default rewrite rules and its cleanup passes as one
call that names none of them. The replay runs the same pieces one at a time on a copy of the unoptimized model, in
the optimizer's order, and keeps those whose pass reports a change: the rules by name (a rule without a name is
named by its replacement and the operators it matches), the passes by class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import onnx

from fuzzer.converters.rewrite_matches import ClassTracker, Fired

_ITERATIONS = 2  # optimize_ir's default: its fold-rewrite-cleanup loop runs twice at most
_CLEANUP = ("RemoveUnusedNodesPass", "LiftConstantsToInitializersPass", "DeduplicateInitializersPass",
            "CommonSubexpressionEliminationPass")


def _rules() -> tuple[Any, ...]:
    from onnxscript import rewriter

    return tuple(rewriter._DEFAULT_REWRITE_RULES)


def _rule_name(rule: Any) -> str:
    if rule.name:
        return str(rule.name)
    replacement = getattr(rule._replacement_pattern, "_function", None)
    ops = [node.op_identifier() for node in getattr(rule._target_pattern, "_nodes", ())]
    matched = "+".join(op[1] if op else "any" for op in ops)
    return f"{getattr(replacement, '__name__', 'rule').lstrip('_')}({matched})"


def _named_rules() -> Iterator[tuple[str, Any]]:
    """Each default rule with a name unique in the set (a repeated name gets `#2`, `#3`)."""
    seen: dict[str, int] = {}
    for rule in _rules():
        name = _rule_name(rule)
        seen[name] = seen.get(name, 0) + 1
        yield (name if seen[name] == 1 else f"{name}#{seen[name]}"), rule


def rule_names() -> tuple[str, ...]:
    """Constant folding, every default rewrite rule and the cleanup passes, as the replay names them."""
    return ("FoldConstantsPass", *(name for name, _ in _named_rules()), *_CLEANUP)


def _passes() -> Iterator[tuple[str, Callable[[Any], Any]]]:
    import onnx_ir.passes.common as common_passes
    from onnxscript.optimizer import _constant_folding
    from onnxscript.rewriter import RewritePass

    loop = [("FoldConstantsPass", _constant_folding.FoldConstantsPass(
        shape_inference=True, input_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        output_size_limit=_constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT))]
    loop += [(name, RewritePass([rule])) for name, rule in _named_rules()]
    loop.append(("RemoveUnusedNodesPass", common_passes.RemoveUnusedNodesPass()))
    yield "InlinePass", common_passes.InlinePass()
    for _ in range(_ITERATIONS):
        yield from loop
    yield "LiftConstantsToInitializersPass", common_passes.LiftConstantsToInitializersPass(
        lift_all_constants=True, size_limit=0)
    yield "DeduplicateInitializersPass", common_passes.DeduplicateInitializersPass()
    yield "CommonSubexpressionEliminationPass", common_passes.CommonSubexpressionEliminationPass()


def fired(unoptimized: onnx.ModelProto) -> tuple[str, ...]:
    """The rules and passes (rule_names) that change `unoptimized` when replayed in the optimizer's order."""
    return replay(unoptimized, classes=False).names


def replay(unoptimized: onnx.ModelProto, classes: bool = True) -> Fired:
    """`fired`'s rules and passes, with the classes of what each changed where `classes` (the model serialized
    after each step that changed it)."""
    import onnx_ir as ir

    model, names = ir.serde.deserialize_model(unoptimized), rule_names()
    changed: set[str] = set()
    tracker = ClassTracker(unoptimized)
    for name, step in _passes():
        if not step(model).modified:
            continue
        if name in names:
            changed.add(name)
        if classes:  # every change moves the model the next step's classes are read from
            tracker.step(name, ir.serde.serialize_model(model))
    return tracker.fired(tuple(name for name in names if name in changed))
