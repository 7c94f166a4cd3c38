"""Running totals of the campaign database, kept in the transaction that records each test, so that `status`, the
report page and a resumed campaign read a week's campaign (millions of tests) in the time they read an hour's.

One table, `tallies (kind, key, n, bugs, seconds)`: per kind, a key and its counters. A database written before the
table (or by a campaign that stopped in between) gets it filled from its rows once, on open, in SQL.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping
from enum import Enum
from typing import Any

from fuzzer.campaign.sources import SourceKind

SCHEMA = """
CREATE TABLE IF NOT EXISTS tallies (
    kind TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL DEFAULT 0, bugs INTEGER NOT NULL DEFAULT 0,
    seconds REAL NOT NULL DEFAULT 0, PRIMARY KEY (kind, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS tests_bug_signature ON tests (signature) WHERE is_bug = 1;
CREATE INDEX IF NOT EXISTS tests_bug_seed ON tests (seed, converter) WHERE is_bug = 1;
"""
FILLED_META = "tallies"  # meta key set once the table holds every row's share (a new database: from the start)
_BUMP = ("INSERT INTO tallies (kind, key, n, bugs, seconds) VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, key) DO UPDATE "
         "SET n = n + excluded.n, bugs = bugs + excluded.bugs, seconds = seconds + excluded.seconds")


class Kind(Enum):
    """What a tally counts, and what its key is."""

    CELL = "cell"  # tests by JSON [converter, symptom, stage]; bugs: those that were bugs
    MINUTE = "minute"  # tests that ran their converter by "converter|minute since the campaign started"
    TIMER = "timer"  # seconds by timer name, of tests and of done units
    REWRITE = "rewrite"  # tests that fired "converter|rewrite"; bugs: those that were bugs
    UPSTREAM = "upstream"  # tests of the ONNX tools by the model they started from
    SEQUENCE = "sequence"  # done graphs with the operator sequence; bugs: those with a failing test
    GRAPHS = "graphs"  # done graphs with sequences recorded ("all"); bugs: those with a failing test
    VALUES = "values"  # done graphs by value strategy
    UNITS = "units"  # done graphs ("done")
    SOURCE = "source"  # done units by source (graphs, zoo); seconds: their tests' and preparation's worker time
    # Edge-case classes (class_tallies.py), keyed "converter|rewrite|class": tests that fired the rewrite on the class
    # (bugs: those that were bugs); tests steered to the pair (bugs: those that reached the tool); those that fired it.
    REWRITE_CLASS = "rewrite_class"
    CLASS_ATTEMPT = "class_attempt"
    CLASS_HIT = "class_hit"


def bump(conn: sqlite3.Connection, rows: Iterable[tuple[Kind, str, int, int, float]]) -> None:
    """Add each (kind, key, n, bugs, seconds) to its tally."""
    conn.executemany(_BUMP, [(kind.value, key, n, bugs, seconds) for kind, key, n, bugs, seconds in rows])


def test_rows(converter: str, symptom: str, stage: str, is_bug: bool, options: Mapping[str, Any],
              timings: Mapping[str, float], rewrites: Iterable[str], minute: int) -> list[tuple[Kind, str, int, int,
                                                                                                 float]]:
    """The tallies one test adds to."""
    bug = int(is_bug)
    rows = [(Kind.CELL, json.dumps([converter, symptom, stage], separators=(",", ":")), 1, bug, 0.0)]  # as json_array
    if stage != "source":
        rows.append((Kind.MINUTE, f"{converter}|{minute}", 1, 0, 0.0))
    if options.get("upstream") is not None:
        rows.append((Kind.UPSTREAM, str(options["upstream"]), 1, 0, 0.0))
    rows += [(Kind.TIMER, name, 0, 0, float(seconds)) for name, seconds in timings.items()]
    rows += [(Kind.REWRITE, f"{converter}|{name}", 1, bug, 0.0) for name in sorted(set(rewrites))]
    return rows


def unit_rows(conn: sqlite3.Connection, idx: int) -> list[tuple[Kind, str, int, int, float]]:
    """The tallies a graph adds to once all its tests are in."""
    row = conn.execute("SELECT timings, sequences, value_strategy FROM units WHERE idx = ?", (idx,)).fetchone()
    if row is None:
        return []
    timings, sequences, values = row
    failed = int(bool(conn.execute("SELECT MAX(is_bug) FROM tests WHERE idx = ?", (idx,)).fetchone()[0]))
    rows = [(Kind.UNITS, "done", 1, failed, 0.0)]
    spent = json.loads(timings or "{}")
    rows += [(Kind.TIMER, name, 0, 0, float(s)) for name, s in spent.items()]
    tested = conn.execute("SELECT COALESCE(SUM(wall_s), 0) FROM tests WHERE idx = ?", (idx,)).fetchone()[0]
    rows.append((Kind.SOURCE, unit_source_key(values), 1, failed, float(tested) + sum(spent.values())))
    if values is not None:
        rows.append((Kind.VALUES, values, 1, 0, 0.0))
    if sequences is not None:
        rows.append((Kind.GRAPHS, "all", 1, failed, 0.0))
        rows += [(Kind.SEQUENCE, seq, 1, failed, 0.0) for seq in set(json.loads(sequences))]
    return rows


def unit_source_key(values: str | None) -> str:
    """A done unit's source, read from its value strategy (a zoo unit's is `zoo`)."""
    return (SourceKind.ZOO if values == SourceKind.ZOO.value else SourceKind.GRAPHS).value


def read(conn: sqlite3.Connection, kind: Kind) -> dict[str, tuple[int, int, float]]:
    """key -> (n, bugs, seconds) of one kind."""
    return {key: (n, bugs, seconds) for key, n, bugs, seconds in
            conn.execute("SELECT key, n, bugs, seconds FROM tallies WHERE kind = ?", (kind.value,))}


def cells(conn: sqlite3.Connection) -> list[tuple[str, str, str, int, int]]:
    """(converter, symptom, stage, tests, bugs), sorted."""
    return sorted((*json.loads(key), n, bugs) for key, (n, bugs, _) in read(conn, Kind.CELL).items())


def rewrite_counts(conn: sqlite3.Connection) -> dict[tuple[str, str], tuple[int, int]]:
    """(converter, rewrite) -> (tests that fired it, those of them that were bugs)."""
    counts = {}
    for key, (n, bugs, _) in read(conn, Kind.REWRITE).items():
        converter, name = key.split("|", 1)
        counts[converter, name] = (n, bugs)
    return counts


def fill(conn: sqlite3.Connection, started: float | None) -> None:
    """Build every tally from the database's rows (a database written before the table); `started`: the campaign's
    first session's start (minutes count from it)."""
    conn.execute("DELETE FROM tallies")
    conn.execute("INSERT INTO tallies SELECT 'cell', json_array(converter, symptom, stage), COUNT(*), SUM(is_bug), 0 "
                 "FROM tests GROUP BY converter, symptom, stage")
    conn.execute("INSERT INTO tallies SELECT 'minute', converter || '|' || CAST(MAX(finished - ?, 0) / 60 AS INTEGER), "
                 "COUNT(*), 0, 0 FROM tests WHERE stage != 'source' GROUP BY 2", (started or 0.0,))
    conn.execute("INSERT INTO tallies SELECT 'upstream', json_extract(options, '$.upstream'), COUNT(*), 0, 0 "
                 "FROM tests WHERE json_extract(options, '$.upstream') IS NOT NULL GROUP BY 2")
    conn.execute("INSERT INTO tallies SELECT 'rewrite', r.converter || '|' || r.rewrite, COUNT(*), SUM(t.is_bug), 0 "
                 "FROM rewrites r JOIN tests t ON t.idx = r.idx AND t.converter = r.converter GROUP BY 2")
    conn.execute("CREATE TEMP TABLE done_units AS SELECT u.idx, u.timings, u.sequences, u.value_strategy, "
                 "COALESCE((SELECT MAX(is_bug) FROM tests t WHERE t.idx = u.idx), 0) AS failed "
                 "FROM units u WHERE u.done = 1")
    conn.execute("INSERT INTO tallies SELECT 'timer', j.key, 0, 0, SUM(j.value) FROM (SELECT timings FROM tests UNION "
                 "ALL SELECT timings FROM done_units) AS t, json_each(t.timings) AS j GROUP BY j.key")
    conn.execute("INSERT INTO tallies SELECT 'units', 'done', COUNT(*), SUM(failed), 0 FROM done_units")
    conn.execute("INSERT INTO tallies SELECT 'values', value_strategy, COUNT(*), 0, 0 FROM done_units "
                 "WHERE value_strategy IS NOT NULL GROUP BY 2")
    conn.execute("INSERT INTO tallies SELECT 'source', CASE WHEN value_strategy = 'zoo' THEN 'zoo' ELSE 'graphs' END, "
                 "COUNT(*), SUM(failed), SUM((SELECT COALESCE(SUM(wall_s), 0) FROM tests t WHERE t.idx = d.idx) + "
                 "(SELECT COALESCE(SUM(j.value), 0) FROM json_each(d.timings) AS j)) FROM done_units AS d GROUP BY 2")
    conn.execute("INSERT INTO tallies SELECT 'graphs', 'all', COUNT(*), SUM(failed), 0 FROM done_units "
                 "WHERE sequences IS NOT NULL HAVING COUNT(*) > 0")
    conn.execute("INSERT INTO tallies SELECT 'sequence', j.value, COUNT(*), SUM(u.failed), 0 FROM done_units AS u, "
                 "json_each(u.sequences) AS j WHERE u.sequences IS NOT NULL GROUP BY j.value")
    conn.execute("DROP TABLE done_units")
    conn.execute("DELETE FROM tallies WHERE n = 0 AND bugs = 0 AND seconds = 0 AND kind != 'timer'")
