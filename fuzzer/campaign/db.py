"""The campaign database: SQLite in WAL mode, one writer (the campaign process), readable at any time.

Tables: meta (the campaign's options and seed base), sessions (one row per run or resume), units (one graph =
seed_base + index, done once all its converter tests are committed), tests (one row per graph x converter),
bugs (one row per distinct signature, with its count and first/last seen) and errors (our own bugs, with their
traceback). A test row, the bug row it touches and the running totals it adds to (tallies.py) are committed in one
transaction.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fuzzer.campaign import tallies
from fuzzer.campaign.class_tallies import CLASSES_META, class_rows, fill_classes
from fuzzer.campaign.result import TestResult
from fuzzer.support.errors import UsageError

DB_NAME = "campaign.db"
DB_SCHEMA = 1

# The rewrites each test fired: a campaign written before the table gets it on open (_add_missing_columns).
_REWRITES = ("CREATE TABLE IF NOT EXISTS rewrites (idx INTEGER NOT NULL, converter TEXT NOT NULL, "
             "rewrite TEXT NOT NULL, PRIMARY KEY (idx, converter, rewrite))")
# The edge-case classes of what each fired rewrite matched (fuzzer/converters/edge_classes.py); likewise added on open.
_REWRITE_CLASSES = ("CREATE TABLE IF NOT EXISTS rewrite_classes (idx INTEGER NOT NULL, converter TEXT NOT NULL, "
                    "rewrite TEXT NOT NULL, class TEXT NOT NULL, PRIMARY KEY (idx, converter, rewrite, class))")
# Per test of a unit steered to a (rewrite, class) pair of its converter, whether it reached the tool's rewrites.
_CLASS_ATTEMPTS = ("CREATE TABLE IF NOT EXISTS class_attempts (idx INTEGER NOT NULL, converter TEXT NOT NULL, "
                   "rewrite TEXT NOT NULL, class TEXT NOT NULL, reached INTEGER NOT NULL, "
                   "PRIMARY KEY (idx, converter))")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY, started REAL NOT NULL, ended REAL, last_beat REAL, workers INTEGER NOT NULL,
    status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (
    idx INTEGER PRIMARY KEY, seed INTEGER NOT NULL, done INTEGER NOT NULL DEFAULT 0, nodes INTEGER,
    timings TEXT NOT NULL DEFAULT '{}', sequences TEXT, value_strategy TEXT);
CREATE TABLE IF NOT EXISTS tests (
    idx INTEGER NOT NULL, seed INTEGER NOT NULL, converter TEXT NOT NULL, options TEXT NOT NULL,
    symptom TEXT NOT NULL, stage TEXT NOT NULL, signature TEXT NOT NULL, is_bug INTEGER NOT NULL,
    labels TEXT NOT NULL, message TEXT NOT NULL, timings TEXT NOT NULL, wall_s REAL NOT NULL,
    session INTEGER NOT NULL, finished REAL NOT NULL, PRIMARY KEY (idx, converter));
CREATE TABLE IF NOT EXISTS bugs (
    signature TEXT PRIMARY KEY, symptom TEXT NOT NULL, stage TEXT NOT NULL, converter TEXT NOT NULL,
    count INTEGER NOT NULL, first_seen REAL NOT NULL, last_seen REAL NOT NULL, first_seed INTEGER NOT NULL,
    case_dir TEXT);
CREATE TABLE IF NOT EXISTS errors (
    id INTEGER PRIMARY KEY, idx INTEGER, seed INTEGER, converter TEXT, phase TEXT NOT NULL,
    exc_type TEXT NOT NULL, message TEXT NOT NULL, traceback TEXT NOT NULL, time REAL NOT NULL);
"""


class CampaignDB:
    """A thin layer over sqlite3; every write method commits its own transaction."""

    def __init__(self, path: Path, create: bool = False) -> None:
        self.path = Path(path)
        self._started: float | None = None  # the campaign's start, once a test needs it (minutes count from it)
        if not create and not self.path.is_file():
            raise UsageError(f"{self.path.parent}: not a campaign folder (no {DB_NAME})")
        try:
            self.conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            if create:
                self.conn.executescript(_SCHEMA)
            version = self.get_meta("db_schema")
            self._add_missing_columns()
            self._fill_tallies(create and version is None)
        except sqlite3.DatabaseError as exc:
            raise UsageError(f"{self.path}: not a readable campaign database ({exc})") from None
        if create and version is None:
            self.set_meta("db_schema", DB_SCHEMA)
        elif version != DB_SCHEMA:
            raise UsageError(f"{self.path}: unknown campaign database schema {version!r} (this reads {DB_SCHEMA})")

    def _add_missing_columns(self) -> None:
        """Columns added since schema 1 (a campaign written before them resumes and reads as before)."""
        columns = {row[1] for row in self.conn.execute("PRAGMA table_info(units)")}
        if columns:  # a campaign's database (a new one too: its schema is made just before)
            self.conn.execute(_REWRITES)
            self.conn.execute(_REWRITE_CLASSES)
            self.conn.execute(_CLASS_ATTEMPTS)
        if columns and "sequences" not in columns:
            self.conn.execute("ALTER TABLE units ADD COLUMN sequences TEXT")
        if columns and "value_strategy" not in columns:
            self.conn.execute("ALTER TABLE units ADD COLUMN value_strategy TEXT")
        sessions = {row[1] for row in self.conn.execute("PRAGMA table_info(sessions)")}
        if sessions and "first_test" not in sessions:  # the span of each session's tests (status's time shares)
            self.conn.execute("ALTER TABLE sessions ADD COLUMN first_test REAL")
            self.conn.execute("ALTER TABLE sessions ADD COLUMN last_test REAL")
            self.conn.execute("UPDATE sessions SET first_test = (SELECT MIN(finished - wall_s) FROM tests WHERE "
                              "session = sessions.id), last_test = (SELECT MAX(finished) FROM tests WHERE "
                              "session = sessions.id)")

    def _fill_tallies(self, new: bool) -> None:
        """The running totals, filled from the rows once where the database was written before them."""
        if not {row[1] for row in self.conn.execute("PRAGMA table_info(units)")}:
            return
        self.conn.executescript(tallies.SCHEMA)
        if self.get_meta(tallies.FILLED_META):
            return
        with self._transaction():
            if not new:
                tallies.fill(self.conn, self.campaign_started())
                if self.get_meta(CLASSES_META):  # kept by its campaign: rebuilt with the rest
                    fill_classes(self.conn)
            self.set_meta(tallies.FILLED_META, True)

    def keep_class_tallies(self) -> None:
        """Fill the class tallies from the rows once, and mark them kept from here on (the campaign writing this
        database calls it: its tests add to them; class_tallies.py)."""
        if self.get_meta(CLASSES_META):
            return
        with self._transaction():
            fill_classes(self.conn)
            self.set_meta(CLASSES_META, True)

    def campaign_started(self) -> float | None:
        """When the campaign's first session started (None before it has one)."""
        return self.conn.execute("SELECT MIN(started) FROM sessions").fetchone()[0]

    def close(self) -> None:
        self.conn.close()

    # ---- meta and sessions ----------------------------------------------------------------------------------

    def get_meta(self, key: str) -> Any:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, key: str, value: Any) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value, sort_keys=True)))

    def start_session(self, workers: int) -> int:
        now = time.time()
        cur = self.conn.execute("INSERT INTO sessions (started, last_beat, workers, status) VALUES (?, ?, ?, ?)",
                                (now, now, workers, "running"))
        return int(cur.lastrowid)

    def beat(self, session: int) -> None:
        self.conn.execute("UPDATE sessions SET last_beat = ? WHERE id = ?", (time.time(), session))

    def end_session(self, session: int, status: str) -> None:
        now = time.time()
        self.conn.execute("UPDATE sessions SET ended = ?, last_beat = ?, status = ? WHERE id = ?",
                          (now, now, status, session))

    # ---- units and tests ----------------------------------------------------------------------------------

    def add_unit(self, idx: int, seed: int) -> None:
        self.conn.execute("INSERT OR IGNORE INTO units (idx, seed) VALUES (?, ?)", (idx, seed))

    def set_unit_info(self, idx: int, nodes: int | None, timings: Mapping[str, float],
                      value_strategy: str | None = None) -> None:
        self.conn.execute("UPDATE units SET nodes = ?, timings = ?, value_strategy = COALESCE(?, value_strategy) "
                          "WHERE idx = ?", (nodes, json.dumps(dict(timings)), value_strategy, idx))

    def set_unit_sequences(self, idx: int, sequences: Iterable[str]) -> None:
        """The operator pairs and triples of the unit's graph (for the report's sequence analysis)."""
        self.conn.execute("UPDATE units SET sequences = ? WHERE idx = ?", (json.dumps(sorted(sequences)), idx))

    def next_index(self) -> int:
        row = self.conn.execute("SELECT MAX(idx) FROM units").fetchone()
        return 0 if row[0] is None else row[0] + 1

    def unfinished(self, converters: Iterable[str]) -> list[tuple[int, int, tuple[str, ...]]]:
        """(idx, seed, converters still to run) of every unit not done, oldest first."""
        wanted = tuple(converters)
        rows = self.conn.execute("SELECT idx, seed FROM units WHERE done = 0 ORDER BY idx").fetchall()
        out = []
        for idx, seed in rows:
            have = {r[0] for r in self.conn.execute("SELECT converter FROM tests WHERE idx = ?", (idx,))}
            out.append((idx, seed, tuple(c for c in wanted if c not in have)))
        return out

    def done_units(self) -> int:
        return tallies.read(self.conn, tallies.Kind.UNITS).get("done", (0, 0, 0.0))[0]

    def record_test(self, row: TestResult, session: int, unit_done: bool) -> bool:
        """Commit one test (and its bug row, and the unit's completion) atomically; True for a new signature."""
        now = time.time()
        new_bug = False
        with self._transaction():
            self.conn.execute(
                "INSERT INTO tests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (row.idx, row.seed, row.converter, json.dumps(dict(row.options), sort_keys=True), row.symptom,
                 row.stage, row.signature, int(row.is_bug), json.dumps(list(row.labels)), row.message[:2000],
                 json.dumps(dict(row.timings)), row.wall_s, session, now))
            self.conn.executemany("INSERT OR IGNORE INTO rewrites VALUES (?, ?, ?)",
                                  [(row.idx, row.converter, name) for name in row.rewrites])
            self.conn.executemany("INSERT OR IGNORE INTO rewrite_classes VALUES (?, ?, ?, ?)",
                                  [(row.idx, row.converter, name, found) for name, classes in
                                   row.rewrite_classes.items() for found in classes])
            self._attempt(row)
            if row.is_bug:
                cur = self.conn.execute(
                    "UPDATE bugs SET count = count + 1, last_seen = ?, case_dir = COALESCE(case_dir, ?) "
                    "WHERE signature = ?", (now, row.case_dir, row.signature))
                if cur.rowcount == 0:
                    new_bug = True
                    self.conn.execute("INSERT INTO bugs VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?)",
                                      (row.signature, row.symptom, row.stage, row.converter, now, now, row.seed,
                                       row.case_dir))
            self._tally(row, session, now)
            if row.cut_from:
                self.conn.execute("UPDATE bugs SET count = count + 1, last_seen = ? WHERE signature = ?",
                                  (now, row.cut_from))
            if unit_done:
                self.conn.execute("UPDATE units SET done = 1 WHERE idx = ?", (row.idx,))
                tallies.bump(self.conn, tallies.unit_rows(self.conn, row.idx))
        return new_bug

    def _attempt(self, row: TestResult) -> None:
        """The test's attempt at the pair its unit was steered to, where that pair is its converter's."""
        converter, rewrite, klass, *_ = (row.steered.split("|", 3) + ["", "", ""])
        if row.steered and converter == row.converter:
            self.conn.execute("INSERT OR REPLACE INTO class_attempts VALUES (?, ?, ?, ?, ?)",
                              (row.idx, converter, rewrite, klass, int(row.reached_tool)))

    def _tally(self, row: TestResult, session: int, now: float) -> None:
        if self._started is None:
            self._started = self.campaign_started() or now
        minute = int(max(now - self._started, 0.0) // 60)
        tallies.bump(self.conn, tallies.test_rows(row.converter, row.symptom, row.stage, row.is_bug, row.options,
                                                  row.timings, row.rewrites, minute))
        tallies.bump(self.conn, class_rows(row))
        began = now - row.wall_s
        self.conn.execute("UPDATE sessions SET first_test = MIN(COALESCE(first_test, ?), ?), "
                          "last_test = MAX(COALESCE(last_test, ?), ?) WHERE id = ?", (began, began, now, now, session))

    def adopt_bug(self, signature: str, symptom: str, stage: str, converter: str, seed: int, case_dir: str) -> None:
        """A case folder whose test was never committed (killed in between): keep it, counted 0 times so far."""
        now = time.time()
        self.conn.execute("INSERT OR IGNORE INTO bugs VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?)",
                          (signature, symptom, stage, converter, now, now, seed, case_dir))

    def record_error(self, idx: int | None, seed: int | None, converter: str | None, phase: str, exc_type: str,
                     message: str, traceback: str) -> None:
        self.conn.execute("INSERT INTO errors (idx, seed, converter, phase, exc_type, message, traceback, time) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (idx, seed, converter, phase, exc_type, message[:2000], traceback, time.time()))

    def bug_signatures(self) -> set[str]:
        return {r[0] for r in self.conn.execute("SELECT signature FROM bugs")}

    def _transaction(self) -> _Transaction:
        return _Transaction(self.conn)


class _Transaction:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")


def campaign_db_path(out_dir: Path) -> Path:
    """The database file of an existing campaign folder; a UsageError when there is none."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise UsageError(f"{out_dir}: no such campaign folder")
    path = out_dir / DB_NAME
    if not path.is_file():
        raise UsageError(f"{out_dir}: not a campaign folder (no {DB_NAME})")
    return path


def open_campaign(out_dir: Path) -> CampaignDB:
    """The database of an existing campaign folder; a UsageError when there is none."""
    return CampaignDB(campaign_db_path(out_dir))
