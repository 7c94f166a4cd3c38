"""How timings are booked into the summary's shares of wall time."""

import pytest

from fuzzer.campaign.policy.culprit_cut import CULPRIT_AVOIDED, CUT_TIMER
from fuzzer.campaign.progress import BLAME_TIMER, category
from fuzzer.check.result import book_inner


@pytest.mark.parametrize(("timer", "share"), [
    ("generate", "generation"),
    ("inputs", "generation"),
    ("reference", "generation"),
    ("export", "conversion"),
    ("converter_other", "conversion"),
    ("converter_until_lost", "conversion"),
    ("runtime_load", "runtime"),
    ("upstream_runtime", "runtime"),
    ("upstream_export", "conversion"),
    ("oracle", "oracle"),
    ("rerun", "oracle"),
    ("locate", "oracle"),
    ("rerun.export", "conversion"),
    ("rerun.runtime", "runtime"),
    ("rerun.oracle", "oracle"),
    ("locate.reference", "generation"),
    ("locate.capture", "conversion"),
    (CULPRIT_AVOIDED, "generation"),  # the worker's own names: progress.py spells them out
    (f"{CULPRIT_AVOIDED}.inputs", "generation"),
    (CUT_TIMER, "generation"),
    (f"{CUT_TIMER}.export", "conversion"),
    (f"{CUT_TIMER}.runtime", "runtime"),
    (BLAME_TIMER, "oracle"),  # deciding whose bug a new case is judges; it converts nothing of the test's own
])
def test_each_timer_is_booked_by_its_own_step(timer: str, share: str) -> None:
    assert category(timer) == share


def test_book_inner_moves_the_steps_out_of_the_follow_up_timer() -> None:
    timings = {"export": 1.0, "rerun": 0.5}
    book_inner(timings, "rerun", {"export": 0.3, "runtime": 0.1})
    assert timings == pytest.approx({"export": 1.0, "rerun": 0.1, "rerun.export": 0.3, "rerun.runtime": 0.1})


def test_book_inner_never_leaves_a_negative_remainder() -> None:
    timings = {"locate": 0.1}
    book_inner(timings, "locate", {"export": 0.2})
    assert timings == {"locate": 0.0, "locate.export": 0.2}


def test_the_summary_counts_tests_that_ran_their_converter_apart(tmp_path) -> None:
    """A test stopped upstream (stage 'source') counts as a test, not as one that exercised its converter."""
    from fuzzer.campaign.db import CampaignDB
    from fuzzer.campaign.progress import format_summary, summarize
    from fuzzer.campaign.result import TestResult

    db = CampaignDB(tmp_path / "campaign.db", create=True)
    session = db.start_session(1)
    for idx, (converter, stage) in enumerate((("onnxsim", "source"), ("onnxsim", "graph_optimization"),
                                              ("torch-onnx-script", "none"))):
        db.add_unit(idx, idx)
        db.record_test(TestResult(idx, idx, converter, "pass", stage), session, True)
    db.end_session(session, "finished")
    data = summarize(db)
    assert (data["tests"], data["tests_ran"]) == (3, 2)
    assert "ran their converter" in format_summary(data)
    db.close()


def test_shares_are_of_the_loop_and_start_up_is_shown_apart(tmp_path) -> None:
    """A session of 60 s whose tests ran from second 10 to second 50: shares are of those 40 s, the rest apart."""
    from fuzzer.campaign.db import CampaignDB
    from fuzzer.campaign.progress import summarize
    from fuzzer.campaign.result import TestResult

    db = CampaignDB(tmp_path / "campaign.db", create=True)
    session = db.start_session(1)
    tests = ((15.0, 5.0, {"export": 5.0}), (50.0, 35.0, {"export": 20.0, "generate": 5.0}))
    for idx, (_, wall, timings) in enumerate(tests):
        db.add_unit(idx, idx)
        db.record_test(TestResult(idx, idx, "torch-onnx-script", "pass", "none", timings=timings, wall_s=wall),
                       session, True)
    db.end_session(session, "finished")
    first = 100 + tests[0][0] - tests[0][1]
    with db.conn:  # the clock of the session and the span of its tests, set by hand
        db.conn.execute("UPDATE sessions SET started = 100, ended = 160, last_beat = 160, first_test = ?, "
                        "last_test = ?", (first, 100 + tests[-1][0]))
    data = summarize(db)
    assert data["worker_wall_s"] == pytest.approx(60.0)
    assert data["edges_s"] == pytest.approx(20.0)
    assert data["shares"] == pytest.approx({"generation": 5 / 40, "conversion": 25 / 40, "runtime": 0.0,
                                            "oracle": 0.0, "overhead": 10 / 40})
    db.close()


def test_the_summary_lists_the_operators_cut_out_before_each_converter(tmp_path) -> None:
    from fuzzer.campaign.db import CampaignDB
    from fuzzer.campaign.policy.novelty import NOVELTY_META, Novelty
    from fuzzer.campaign.progress import format_summary, summarize

    novelty = Novelty()
    for dtype in ("float32", "float16"):
        novelty.record("sig-conv1d", [("conv1d", dtype)], localized=True, culprit=("onnx2tf", "conv1d"))
    db = CampaignDB(tmp_path / "campaign.db", create=True)
    db.set_meta(NOVELTY_META, novelty.tally())
    data = summarize(db)
    assert data["cut_out"] == {"onnx2tf": ["conv1d"]}
    assert "cut out before onnx2tf runs (behind its bugs hit often): 1 operator: conv1d" in format_summary(data)
    db.close()

