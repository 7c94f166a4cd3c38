"""Which (rewrite, edge-case class) pairs a campaign fired, per tool: the classes (fuzzer/converters/edge_classes.py)
each test recorded for what each rewrite matched, and the pairs that count as reachable.

Every pair of a reachable rewrite and a class is reachable, except where (the reason goes with the pair):
- the tool says its rewrites cannot meet the class (capabilities.ClassReach);
- learned from the campaign: the operators a rewrite matched in the tests that fired it take no such dtype in ONNX's
  schemas, or no CPU kernel of ONNX Runtime's takes it (a model with that dtype fails before the tool runs; float16
  counts as float32 there: ONNX Runtime casts around a float-only kernel); none of them broadcasts (broadcast);
  they are Constant nodes alone, which read no operands (the operand classes);
- learned from the steering (policy/class_steering.py): every test steered to the pair ended before the rewrite
  could run (the upstream model failed, or the graph could not be made so)."""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fuzzer.campaign import tallies
from fuzzer.campaign.class_tallies import CLASSES_META, read_classes
from fuzzer.converters.edge_classes import BROADCASTING, OP_PREFIX, EdgeClass

# Of the steered attempts at a pair, how many ending before the rewrite mark it unreachable (none having reached it).
LEARNED_AFTER = 3
_CLASSES = tuple(cls.value for cls in EdgeClass)
_DTYPE_TYPES = {"float16": "tensor(float16)", "bfloat16": "tensor(bfloat16)", "float32": "tensor(float)",
                "float64": "tensor(double)", "int8": "tensor(int8)", "uint8": "tensor(uint8)",
                "int32": "tensor(int32)", "int64": "tensor(int64)", "bool": "tensor(bool)"}


@dataclass(frozen=True)
class ClassCoverage:
    """One tool's (rewrite, class) pairs: per pair the tests that fired it and how many were bugs; the pairs left
    out of the reachable ones, each with why."""

    rewrites: tuple[str, ...] = ()  # the tool's reachable rewrites
    fired: Mapping[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    excluded: Mapping[tuple[str, str], str] = field(default_factory=dict)
    # The budget split: of the tool's tests, those of units steered to one of its pairs; of those, how many reached
    # the tool and how many fired the pair aimed at.
    tests: int = 0
    steered: tuple[int, int, int] = (0, 0, 0)
    # Per bug signature of the tool, the (rewrite, class) pairs every test that hit it fired: the classes it is
    # named with.
    bug_classes: Mapping[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)

    @property
    def reachable(self) -> tuple[tuple[str, str], ...]:
        return tuple((r, c) for r in self.rewrites for c in _CLASSES if (r, c) not in self.excluded)

    @property
    def never_fired(self) -> tuple[tuple[str, str], ...]:
        return tuple(pair for pair in self.reachable if pair not in self.fired)

    @property
    def share(self) -> float:
        """The share of the reachable pairs that fired at least once (0 when none are reachable)."""
        reachable = self.reachable
        return sum(1 for pair in reachable if pair in self.fired) / len(reachable) if reachable else 0.0

    def of_rewrite(self, rewrite: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The classes `rewrite` fired in, and its reachable classes it never fired in."""
        fired = tuple(c for c in _CLASSES if (rewrite, c) in self.fired)
        never = tuple(c for c in _CLASSES if (rewrite, c) not in self.fired and (rewrite, c) not in self.excluded)
        return fired, never

    def summary(self) -> str:
        reachable = self.reachable
        fired = len(reachable) - len(self.never_fired)
        text = (f"{fired} of {len(reachable)} reachable (rewrite, class) pairs fired ({self.share:.0%}); "
                f"{len(self.excluded)} pairs unreachable")
        steered, reached, hit = self.steered
        if steered:
            text += (f"; {steered} tests ({steered / max(self.tests, 1):.0%} of its {self.tests}) steered to pairs "
                     f"never fired, {reached} reached it, {hit} fired the pair")
        return text

    def to_json(self) -> dict[str, Any]:
        steered, reached, hit = self.steered
        return {"classes": list(_CLASSES), "reachable": len(self.reachable), "fired_share": self.share,
                "steering": {"tests": self.tests, "steered": steered, "reached": reached, "fired_target": hit},
                "bug_classes": [{"signature": sig, "pairs": [{"rewrite": r, "class": c} for r, c in pairs]}
                                for sig, pairs in sorted(self.bug_classes.items())],
                "fired": [{"rewrite": r, "class": c, "tests": n, "bugs": b}
                          for (r, c), (n, b) in sorted(self.fired.items())],
                "never_fired": [{"rewrite": r, "class": c} for r, c in self.never_fired],
                "unreachable": [{"rewrite": r, "class": c, "why": why}
                                for (r, c), why in sorted(self.excluded.items())]}


def class_counts(conn: sqlite3.Connection) -> dict[str, dict[tuple[str, str], tuple[int, int]]]:
    """Per converter, (rewrite, label) -> (tests that recorded it, those of them that were bugs); labels are class
    names and 'op:' operator types. From the tallies where the writing campaign keeps them, else from the rows (a
    campaign written before classes were recorded has none)."""
    found: dict[str, dict[tuple[str, str], tuple[int, int]]] = {}
    if _kept(conn):
        for (converter, rewrite, label), counts in read_classes(conn, tallies.Kind.REWRITE_CLASS).items():
            found.setdefault(converter, {})[rewrite, label] = counts
        return found
    rows = conn.execute("SELECT r.converter, r.rewrite, r.class, COUNT(*), COALESCE(SUM(t.is_bug), 0) "
                        "FROM rewrite_classes AS r JOIN tests AS t USING (idx, converter) GROUP BY 1, 2, 3")
    for converter, rewrite, label, n, bugs in rows:
        found.setdefault(converter, {})[rewrite, label] = (n, bugs)
    return found


def _kept(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (CLASSES_META,)).fetchone()
    return row is not None and json.loads(row[0]) is True


def bug_classes(conn: sqlite3.Connection) -> dict[str, dict[str, tuple[tuple[str, str], ...]]]:
    """Per converter, per bug signature, the (rewrite, class) pairs every test that hit the signature fired."""
    hits = dict(((c, s), n) for c, s, n in conn.execute(
        "SELECT converter, signature, COUNT(*) FROM tests WHERE is_bug = 1 GROUP BY 1, 2"))
    found: dict[str, dict[str, list[tuple[str, str]]]] = {}
    for converter, signature, rewrite, cls, n in conn.execute(
            "SELECT t.converter, t.signature, r.rewrite, r.class, COUNT(DISTINCT t.idx) FROM tests AS t "
            "JOIN rewrite_classes AS r USING (idx, converter) WHERE t.is_bug = 1 GROUP BY 1, 2, 3, 4 "
            "ORDER BY 1, 2, 3, 4"):
        if n == hits.get((converter, signature)) and not cls.startswith(OP_PREFIX):
            found.setdefault(converter, {}).setdefault(signature, []).append((rewrite, cls))
    return {c: {s: tuple(p) for s, p in by.items()} for c, by in found.items()}


def attempts(conn: sqlite3.Connection) -> dict[str, dict[tuple[str, str], tuple[int, int, int]]]:
    """Per converter, (rewrite, class) -> (tests steered to it, those that reached the tool, those that fired it)."""
    found: dict[str, dict[tuple[str, str], tuple[int, int, int]]] = {}
    if _kept(conn):
        hits = read_classes(conn, tallies.Kind.CLASS_HIT)
        for key, (n, reached) in read_classes(conn, tallies.Kind.CLASS_ATTEMPT).items():
            found.setdefault(key[0], {})[key[1], key[2]] = (n, reached, hits.get(key, (0, 0))[0])
        return found
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'class_attempts'").fetchone():
        return found
    for converter, rewrite, cls, n, reached, hit in conn.execute(
            "SELECT a.converter, a.rewrite, a.class, COUNT(*), SUM(a.reached), SUM(EXISTS (SELECT 1 FROM "
            "rewrite_classes AS r WHERE r.idx = a.idx AND r.converter = a.converter AND r.rewrite = a.rewrite AND "
            "r.class = a.class)) FROM class_attempts AS a GROUP BY 1, 2, 3"):
        found.setdefault(converter, {})[rewrite, cls] = (n, reached, hit)
    return found


def class_coverage(rewrites: Iterable[str], counts: Mapping[tuple[str, str], tuple[int, int]],
                   tool_reach: Mapping[str, str], tried: Mapping[tuple[str, str], tuple[int, int, int]],
                   tests: int = 0, bugs: Mapping[str, tuple[tuple[str, str], ...]] | None = None) -> ClassCoverage:
    """A tool's pair coverage: `rewrites` its reachable ones, `counts` its class_counts, `tool_reach` the classes it
    says its rewrites cannot meet (with why), `tried` its steered attempts (attempts), `tests` all its tests, `bugs`
    its bug_classes."""
    names = tuple(rewrites)
    fired = {(r, c): nb for (r, c), nb in counts.items() if not c.startswith(OP_PREFIX)}
    ops: dict[str, set[str]] = {}
    for r, label in counts:
        if label.startswith(OP_PREFIX):
            ops.setdefault(r, set()).add(label.removeprefix(OP_PREFIX))
    excluded: dict[tuple[str, str], str] = {}
    for r in names:
        for c in _CLASSES:
            if (r, c) in fired:
                continue
            why = tool_reach.get(c) or unreachable_for_ops(c, frozenset(ops.get(r, ()))) or \
                _tried_out(tried.get((r, c)))
            if why:
                excluded[r, c] = why
    steered = tuple(sum(t[i] for t in tried.values()) for i in range(3))
    return ClassCoverage(names, fired, excluded, tests, (steered[0], steered[1], steered[2]), dict(bugs or {}))


def unreachable_for_ops(cls: str, ops: frozenset[str]) -> str:
    """Why a rewrite whose matches were of operators `ops` cannot meet class `cls` ("" where it can, or nothing is
    known of it)."""
    return _dtype_unreachable(cls, ops) or _shape_unreachable(cls, ops)


def _tried_out(tried: tuple[int, int, int] | None) -> str:
    if tried is None or tried[0] < LEARNED_AFTER or tried[1]:
        return ""
    return f"learned: all {tried[0]} tests steered to it ended before the rewrite ran"


def _dtype_unreachable(cls: str, ops: frozenset[str]) -> str:
    """Why a rewrite whose matches were of operators `ops` cannot meet dtype `cls` ("" where it can, or where
    nothing is known: no op learned, or one outside the ONNX domain)."""
    wanted = _DTYPE_TYPES.get(cls)
    if wanted is None or not ops or any("." in op for op in ops):
        return ""
    listed = ", ".join(sorted(ops))
    if not any(wanted in _schema_types(op) for op in ops):
        return f"learned: its operators ({listed}) take no {cls} in ONNX's schemas"
    kernel = "tensor(float)" if cls == "float16" else wanted
    if not any(kernel in _cpu_kernel_types(op) for op in ops):
        return f"learned: no CPU kernel of ONNX Runtime's for its operators ({listed}) takes {cls}"
    return ""


_OPERAND_CLASSES = frozenset({EdgeClass.CONSTANT_OPERAND.value, EdgeClass.INPUT_OPERAND.value,
                              EdgeClass.CONSTANT_ZERO.value, EdgeClass.CONSTANT_NEGATIVE.value,
                              EdgeClass.CONSTANT_NONFINITE.value, EdgeClass.CONSTANT_EMPTY.value})


def _shape_unreachable(cls: str, ops: frozenset[str]) -> str:
    """Why a rewrite whose matches were of operators `ops` cannot meet a broadcast or an operand class ("" where it
    can, or nothing is known)."""
    if not ops or any("." in op for op in ops):
        return ""
    listed = ", ".join(sorted(ops))
    if cls == EdgeClass.BROADCAST.value and not ops & BROADCASTING:
        return f"learned: its operators ({listed}) do not broadcast"
    if cls in _OPERAND_CLASSES and ops <= {"Constant"}:
        return f"learned: its operators ({listed}) read no operands"
    return ""


@functools.cache
def _schema_types(op: str) -> frozenset[str]:
    """Every type any version of ONNX's schema for `op` allows (empty for an unknown op)."""
    import onnx.defs

    found: set[str] = set()
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.name == op and schema.domain in ("", "ai.onnx"):
            for constraint in schema.type_constraints:
                found.update(constraint.allowed_type_strs)
    return frozenset(found) or frozenset(_DTYPE_TYPES.values())  # unknown: nothing learned


@functools.cache
def _cpu_kernel_types(op: str) -> frozenset[str]:
    """Every type ONNX Runtime's CPU kernels for `op` take (every type where it lists none)."""
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    found: set[str] = set()
    for kernel in state.get_all_opkernel_def():
        if kernel.op_name == op and kernel.domain in ("", "ai.onnx") and kernel.provider == "CPUExecutionProvider":
            for types in kernel.type_constraints.values():
                found.update(types)
    return frozenset(found) or frozenset(_DTYPE_TYPES.values())
