"""The campaign's records: the database (the only writer), the live counts, and what the campaign has learned
from its results, the bugs hit often (novelty.py) and the rewrites seen to fire (steering.py), which decide the
demotions units are sent with. It sees results, never the workers that made them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fuzzer.campaign.db import CampaignDB
from fuzzer.campaign.messages import OwnError, UnitGraph
from fuzzer.campaign.policy.class_steering import ClassSteering
from fuzzer.campaign.policy.culprit_cut import CULPRIT_AVOIDED, CULPRIT_CUT
from fuzzer.campaign.policy.novelty import DEMOTED_META, NOVELTY_META, Demotion, Novelty
from fuzzer.campaign.policy.settings import setting_detail
from fuzzer.campaign.policy.steering import Steering
from fuzzer.campaign.policy.traits import TRAIT
from fuzzer.campaign.progress import Counts
from fuzzer.campaign.result import LOST_SYMPTOMS, TestResult
from fuzzer.campaign.spec import case_folders
from fuzzer.cases.folder import read_case
from oracles.verdict import Stage

OWN_ERRORS_LOG = "own_errors.log"


class Recorder:
    """Commits each result as it arrives, so that a campaign killed at any point resumes without repeating one."""

    def __init__(self, db: CampaignDB, log_dir: Path, demote_known: bool) -> None:
        self.db = db
        self.log_dir = log_dir
        self.demote_known = demote_known
        self.session = 0
        self.counts = Counts.from_db(db)
        # What the campaign has hit often: generated less when demote_known.
        self.novelty = Novelty.from_tally(db.get_meta(NOVELTY_META), db.get_meta(DEMOTED_META) or ())
        # The ONNX tools' rewrites seen to fire: their patterns are drawn more often until they have (steering.py).
        self.steering = Steering.from_db(db)
        # The (rewrite, class) pairs fired and the attempts at those never fired (class_steering.py).
        db.keep_class_tallies()  # this campaign writes the database: it keeps the class tallies from here on
        self.class_steering = ClassSteering.from_db(db)
        self._in_force: tuple[tuple[list[Demotion], ...], list[Demotion]] | None = None

    def start(self, workers: int) -> None:
        self.session = self.db.start_session(workers)

    def beat(self) -> None:
        self.db.beat(self.session)

    def end(self, status: str) -> None:
        """Close the session and keep what the campaign learned, for status and a resume."""
        self.db.end_session(self.session, status)
        self.db.set_meta(DEMOTED_META, self.novelty.demoted())
        self.db.set_meta(NOVELTY_META, self.novelty.tally())

    def unit_graph(self, msg: UnitGraph) -> None:
        self.db.set_unit_sequences(msg.idx, msg.sequences)  # the worker has the graph parsed already

    def unit_info(self, idx: int, nodes: int | None, timings: dict[str, float], values: str | None = None) -> None:
        self.db.set_unit_info(idx, nodes, timings, values)

    def own_error(self, msg: OwnError) -> None:
        """A convsmith bug: a row in the errors table, its traceback in the log, counted."""
        self.db.record_error(msg.idx, msg.seed, msg.converter, msg.phase, msg.exc_type, msg.message, msg.traceback)
        with open(self.log_dir / OWN_ERRORS_LOG, "a") as handle:
            handle.write(f"--- seed {msg.seed} converter {msg.converter} phase {msg.phase}\n{msg.traceback}\n")
        self.counts.own_errors += 1

    def test(self, result: TestResult, pairs: Sequence[tuple[str, str]], unit_done: bool) -> bool:
        """Commit one test of a graph holding `pairs` (the unit with it when `unit_done`); True for a new bug."""
        new_bug = self.db.record_test(result, self.session, unit_done)
        self.steering.record(result.converter, result.rewrites)
        self.class_steering.record(result)
        pairs = [*_tested(pairs, result.labels), *((TRAIT, trait) for trait in result.traits)]
        # The base rates a bug's hits are weighed against count the tests that ran their converter: one skipped as
        # known unsupported or for a known root cause could not have hit a bug.
        if result.stage != Stage.SOURCE.value:
            self.novelty.seen(result.converter, pairs, known=result.is_bug and not new_bug)
        if result.cut_from:  # the filed bug the test hit before its culprit was cut out still counts the hit
            cut = next((label.split(":", 1)[1] for label in result.labels if label.startswith(f"{CULPRIT_CUT}:")), "")
            if cut and result.signature == result.cut_from:  # the bug outlived its culprit's cut: not its culprit
                self.novelty.refute(result.cut_from, result.converter, cut)
            cut = self._culprit(result.cut_from, result.converter, cut)
            narrowed, localized = _narrowed(pairs, cut)
            self.novelty.record(result.cut_from, narrowed, localized=localized, culprit=(result.converter, cut))
        # A graph that met the same filed bug again with the culprit cut out is one hit of it, not two.
        if result.is_bug and result.signature and result.signature != result.cut_from:
            named = self._culprit(result.signature, result.converter, result.culprit)
            narrowed, localized = _narrowed(pairs, named)
            self.novelty.record(result.signature, narrowed, result.symptom in LOST_SYMPTOMS, localized,
                                (result.converter, named))
            detail = setting_detail(result.converter, result.message)
            if detail is not None:
                self.novelty.record_setting(detail)
        self.counts.add(result.symptom, new_bug)
        return new_bug

    def _culprit(self, signature: str, converter: str, operator: str) -> str:
        """The operator a hit of `signature` names as its culprit, "" where none is or it was refuted."""
        return "" if operator and self.novelty.is_refuted(signature, converter, operator) else operator

    def demotions_in_force(self, converters: Sequence[str]) -> list[Demotion]:
        """What units are sent with, where the campaign spends its budget on what is new (demote_known): the
        demotions of known bugs and the boosts of rewrites not yet seen to fire; the same list while neither
        changes, so that a worker is told only of a change."""
        if not self.demote_known:
            return []
        parts = (self.novelty.demotions(), self.steering.boosts(converters), self.class_steering.targets(converters))
        if self._in_force is None or any(a is not b for a, b in zip(parts, self._in_force[0], strict=True)):
            self._in_force = (parts, parts[0] + parts[1] + parts[2])
        return self._in_force[1]

    def adopt_orphans(self, out_dir: Path) -> None:
        """Case folders written by a test that was killed before its commit: keep them as bugs seen 0 times."""
        known = self.db.bug_signatures()
        for folder in sorted(case_folders(out_dir)):
            case = read_case(folder)
            if case.signature not in known:
                self.db.adopt_bug(case.signature, case.verdict.symptom.json_name, case.verdict.stage.value,
                                  case.converter, case.seed, folder.name)


def _tested(pairs: Sequence[tuple[str, str]], labels: Sequence[str]) -> Sequence[tuple[str, str]]:
    """The pairs of the graph the converter was given: the unit's, less the operators cut out before it ran."""
    cut = [label.split(":", 1)[1].split(",") for label in labels if label.startswith(f"{CULPRIT_AVOIDED}:")]
    return [pair for pair in pairs if pair[0] not in cut[0]] if cut else pairs


def _narrowed(pairs: Sequence[tuple[str, str]], culprit: str) -> tuple[Sequence[tuple[str, str]], bool]:
    """The pairs of the operator a root cause is filed under, where the test named one that the graph holds (and
    True), else every pair of the graph (and False)."""
    mine = [pair for pair in pairs if pair[0] == culprit] if culprit else []
    return (mine, True) if mine else (pairs, False)
