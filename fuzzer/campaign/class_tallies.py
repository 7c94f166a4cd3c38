"""Running totals of the edge-case classes (tallies.Kind.REWRITE_CLASS, CLASS_ATTEMPT, CLASS_HIT), so that `status`
and `ops --coverage` read a week's campaign without reading its rewrite_classes rows. The campaign that writes a
database keeps them (the recorder fills them once from the rows, then every test adds to them: CLASSES_META marks
it); a reader of a database no such campaign wrote (written before them, or by one still running older code) sums the
rows instead (class_coverage.py)."""

from __future__ import annotations

import sqlite3

from fuzzer.campaign import tallies
from fuzzer.campaign.result import TestResult

CLASSES_META = "tallies_classes"  # meta key: the writing campaign keeps the class tallies


def class_rows(row: TestResult) -> list[tuple[tallies.Kind, str, int, int, float]]:
    """The class tallies one test adds to."""
    bug = int(row.is_bug)
    rows = [(tallies.Kind.REWRITE_CLASS, f"{row.converter}|{rewrite}|{label}", 1, bug, 0.0)
            for rewrite, labels in row.rewrite_classes.items() for label in sorted(set(labels))]
    converter, rewrite, klass, *_ = (row.steered.split("|", 3) + ["", "", ""])
    if row.steered and converter == row.converter:
        key = f"{converter}|{rewrite}|{klass}"
        rows.append((tallies.Kind.CLASS_ATTEMPT, key, 1, int(row.reached_tool), 0.0))
        if klass in row.rewrite_classes.get(rewrite, ()):
            rows.append((tallies.Kind.CLASS_HIT, key, 1, 0, 0.0))
    return rows


def fill_classes(conn: sqlite3.Connection) -> None:
    """The class tallies built from the rows (once, by the campaign that goes on writing the database)."""
    kinds = (tallies.Kind.REWRITE_CLASS.value, tallies.Kind.CLASS_ATTEMPT.value, tallies.Kind.CLASS_HIT.value)
    conn.execute("DELETE FROM tallies WHERE kind IN (?, ?, ?)", kinds)
    conn.execute("INSERT INTO tallies SELECT 'rewrite_class', r.converter || '|' || r.rewrite || '|' || r.class, "
                 "COUNT(*), SUM(t.is_bug), 0 FROM rewrite_classes AS r JOIN tests AS t USING (idx, converter) "
                 "GROUP BY 2")
    conn.execute("INSERT INTO tallies SELECT 'class_attempt', converter || '|' || rewrite || '|' || class, COUNT(*), "
                 "SUM(reached), 0 FROM class_attempts GROUP BY 2")
    conn.execute("INSERT INTO tallies SELECT 'class_hit', a.converter || '|' || a.rewrite || '|' || a.class, "
                 "COUNT(*), 0, 0 FROM class_attempts AS a JOIN rewrite_classes AS r USING (idx, converter, rewrite, "
                 "class) GROUP BY 2")


def read_classes(conn: sqlite3.Connection, kind: tallies.Kind) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(converter, rewrite, class) -> (n, bugs) of one class tally."""
    found = {}
    for key, (n, bugs, _) in tallies.read(conn, kind).items():
        converter, rest = key.split("|", 1)
        rewrite, label = rest.rsplit("|", 1)
        found[converter, rewrite, label] = (n, bugs)
    return found
