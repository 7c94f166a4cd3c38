"""The campaign database's running totals: what record_test adds equals what a fill from the rows finds, and a
database written before them gets them on open."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fuzzer.campaign import tallies
from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.progress import summarize
from fuzzer.campaign.result import TestResult

TESTS = (  # (unit, converter, symptom, stage, is_bug, options, timings, rewrites)
    (0, "torch-onnx-dynamo", "pass", "none", False, {"opset": 18}, {"export": 0.5, "runtime": 0.1}, ()),
    (0, "ort-optimizer", "wrong_values", "graph_optimization", True, {"upstream": "torch-onnx-dynamo"},
     {"optimize": 0.2, "ahead.generate": 0.3}, ("GeluFusion", "ConstantFolding")),
    (1, "onnxsim", "crash", "source", False, {"upstream": "native"}, {"generate": 0.01}, ()),
    (1, "onnxslim", "pass", "graph_optimization", False, {"upstream": "native"}, {"simplify": 0.4},
     ("fuse_bn_into_conv",)),
    (2, "torch-onnx-script", "crash", "node_conversion", True, {}, {"export": 0.3}, ()),
)
SEQUENCES = {0: ["add>relu", "relu>mul"], 1: ["add>relu"], 2: ["conv>add"]}


def _campaign(path: Path) -> CampaignDB:
    db = CampaignDB(path, create=True)
    session = db.start_session(2)
    for idx, seqs in SEQUENCES.items():
        db.add_unit(idx, 100 + idx)
        db.set_unit_info(idx, 3, {"generate": 0.01 * (idx + 1)}, "uniform" if idx else "boundary")
        db.set_unit_sequences(idx, seqs)
    last = {idx: max(i for i, t in enumerate(TESTS) if t[0] == idx) for idx in SEQUENCES}
    for i, (idx, converter, symptom, stage, bug, options, timings, rewrites) in enumerate(TESTS):
        row = TestResult(idx, 100 + idx, converter, symptom, stage, f"sig-{i}" if bug else "", bug,
                         options=options, timings=timings, wall_s=0.5, rewrites=rewrites)
        db.record_test(row, session, unit_done=last[idx] == i and idx != 2)  # unit 2 is left unfinished
    db.end_session(session, "finished")
    return db


def _all(conn: sqlite3.Connection) -> dict[str, dict[str, tuple[int, int, float]]]:
    return {kind.value: {k: (n, b, round(s, 9)) for k, (n, b, s) in tallies.read(conn, kind).items()}
            for kind in tallies.Kind}


def test_recorded_tallies_count_tests_and_done_graphs(tmp_path: Path) -> None:
    db = _campaign(tmp_path / "campaign.db")
    found = _all(db.conn)
    assert found["cell"]['["ort-optimizer","wrong_values","graph_optimization"]'] == (1, 1, 0.0)
    assert found["minute"] == {"torch-onnx-dynamo|0": (1, 0, 0.0), "ort-optimizer|0": (1, 0, 0.0),
                               "onnxslim|0": (1, 0, 0.0), "torch-onnx-script|0": (1, 0, 0.0)}
    assert found["upstream"] == {"torch-onnx-dynamo": (1, 0, 0.0), "native": (2, 0, 0.0)}
    assert found["rewrite"] == {"ort-optimizer|GeluFusion": (1, 1, 0.0), "ort-optimizer|ConstantFolding": (1, 1, 0.0),
                                "onnxslim|fuse_bn_into_conv": (1, 0, 0.0)}
    assert found["units"] == {"done": (2, 1, 0.0)}  # unit 2 never finished
    assert found["graphs"] == {"all": (2, 1, 0.0)}
    assert found["sequence"] == {"add>relu": (2, 1, 0.0), "relu>mul": (1, 1, 0.0)}
    assert found["values"] == {"boundary": (1, 0, 0.0), "uniform": (1, 0, 0.0)}
    assert found["timer"]["generate"] == (0, 0, round(0.01 + 0.01 + 0.02, 9))  # a test's and two done units'
    assert db.done_units() == 2
    db.close()


def test_a_fill_from_the_rows_finds_what_was_recorded(tmp_path: Path) -> None:
    db = _campaign(tmp_path / "campaign.db")
    recorded, summary = _all(db.conn), summarize(db)
    tallies.fill(db.conn, db.campaign_started())
    assert _all(db.conn) == recorded
    assert summarize(db) == summary
    db.close()


def test_a_database_written_before_the_tallies_gets_them_on_open(tmp_path: Path) -> None:
    path = tmp_path / "campaign.db"
    db = _campaign(path)
    recorded, summary = _all(db.conn), summarize(db)
    db.close()
    with sqlite3.connect(path) as conn:  # as an older convsmith left it
        conn.execute("DROP TABLE tallies")
        conn.execute("DELETE FROM meta WHERE key = ?", (tallies.FILLED_META,))
        conn.execute("ALTER TABLE sessions DROP COLUMN first_test")
        conn.execute("ALTER TABLE sessions DROP COLUMN last_test")
    reopened = CampaignDB(path)
    assert _all(reopened.conn) == recorded
    assert summarize(reopened) == summary
    reopened.close()
