"""The `slow` marker for tests whose files other engineers own (issue 35).

A test that starts a campaign, worker processes or a standalone interpreter per case carries
`@pytest.mark.slow` in its own file; these are the ones in files this change could not edit. When their owners
add the marker in place, the entry here goes.
"""

from __future__ import annotations

import pytest

SLOW_ELSEWHERE: dict[str, frozenset[str]] = {
    # Each corpus case's repro.py and snippet run in fresh interpreters (about 10 s a case).
    "test_repro.py": frozenset({
        "test_every_corpus_report_is_short_and_its_snippet_shows_the_bug",
        "test_repro_scripts_stand_alone_and_show_the_bug",
        "test_the_snippet_of_a_tool_failing_at_validation_runs_alone",
        "test_repro_py_exits_4_when_the_bug_is_replaced_by_another_failure",
    }),
    # A campaign with a worker that dies, and a reduction in an isolated child.
    "test_lost_cases.py": frozenset({
        "test_a_campaign_case_of_a_dead_worker_replays_alone_and_names_no_path",
        "test_a_reduced_case_of_a_dead_child_replays_alone",
    }),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in SLOW_ELSEWHERE.get(item.path.name, frozenset()):
            item.add_marker(pytest.mark.slow)
