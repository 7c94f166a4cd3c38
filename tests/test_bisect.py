"""`convsmith bisect`: the search over fake release tables, the release plan, the cached release environments (a
planted package installed by a fake pip, imported for real) and the command's bad-input exits. No network here: the
real installs are docs/investigations/bisect-corpus.md's demonstration."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from fuzzer.campaign.bisect_queue import BISECT_NICE, POLL_S, BisectQueue
from fuzzer.cases.diagnosis import Blame
from fuzzer.cases.folder import read_case
from fuzzer.cases.fresh_replay import repro_detail
from fuzzer.cases.remedy import Bisection, ReleaseOutcome, ReleaseRun
from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.describe import Component
from fuzzer.diagnosis.bisect_case import blamed_distribution, record_bisection
from fuzzer.diagnosis.bisect_search import NotShown, bisect_releases
from fuzzer.support.errors import CannotRun
from fuzzer.support.release_envs import MARKER, EnvError, ensure_env, env_path, load_env, unmet
from fuzzer.support.releases import available_versions, final_versions, index_versions, plan_releases, releases_to_try

BUG, PASSES, ERROR = ReleaseOutcome.BUG, ReleaseOutcome.PASSES, ReleaseOutcome.ERROR
CORPUS = Path(__file__).resolve().parent.parent / "corpus"
SLIM_CASE = CORPUS / "crash-onnxslim-graph_optimization-ValueError-01ab1eabbd25-reduced"
ORT_CASE = CORPUS / "crash-ort-optimizer-graph_optimization-Fail-e83800d5cf55-reduced"
DYNAMO_CASE = CORPUS / ("dynamic-shape-wrong_values-torch-onnx-dynamo-node_conversion-adaptive_avg_pool1d-float32-"
                        "99160fa4b9ed-reduced")


class FakeReleases:
    """A fake release runner: a table of version -> outcome, and the versions it ran, in order."""

    def __init__(self, table: Mapping[str, ReleaseOutcome]) -> None:
        self.table, self.ran = dict(table), []

    def __call__(self, version: str) -> ReleaseRun:
        self.ran.append(version)
        return ReleaseRun(version, self.table[version], f"fake {version}")


def fake_table(*outcomes: ReleaseOutcome) -> dict[str, ReleaseOutcome]:
    return {f"1.{i}.0": outcome for i, outcome in enumerate(outcomes)}


def test_a_regression_is_found_by_binary_search_installed_first_oldest_second():
    fake = FakeReleases(fake_table(PASSES, PASSES, PASSES, BUG, BUG, BUG, BUG, BUG))
    found = bisect_releases("lib", list(fake.table), "1.7.0", fake)
    assert (found.first_bad, found.last_good) == ("1.3.0", "1.2.0")
    assert fake.ran == ["1.7.0", "1.0.0", "1.4.0", "1.2.0", "1.3.0"]
    assert [r.version for r in found.runs] == ["1.0.0", "1.2.0", "1.3.0", "1.4.0", "1.7.0"]  # oldest first
    assert found.summary() == "a regression since lib 1.3.0 (1.2.0 does not show it)"


def test_present_since_the_oldest_release_in_range():
    fake = FakeReleases(fake_table(BUG, BUG, BUG, BUG))
    found = bisect_releases("lib", list(fake.table), "1.3.0", fake)
    assert (found.first_bad, found.last_good, fake.ran) == ("1.0.0", "", ["1.3.0", "1.0.0"])
    assert found.summary().startswith("present since at least lib 1.0.0")


def test_error_releases_in_the_middle_are_stepped_over_never_counted():
    fake = FakeReleases(fake_table(PASSES, PASSES, ERROR, ERROR, BUG, BUG))
    found = bisect_releases("lib", list(fake.table), "1.5.0", fake)
    assert (found.first_bad, found.last_good) == ("1.4.0", "1.1.0")
    assert fake.ran == ["1.5.0", "1.0.0", "1.3.0", "1.2.0", "1.4.0", "1.1.0"]
    assert [r.outcome for r in found.runs] == [PASSES, PASSES, ERROR, ERROR, BUG, BUG]


def test_errors_between_the_last_good_and_the_installed_leave_the_installed_first_bad():
    fake = FakeReleases(fake_table(PASSES, ERROR, ERROR, BUG))
    found = bisect_releases("lib", list(fake.table), "1.3.0", fake)
    assert (found.first_bad, found.last_good) == ("1.3.0", "1.0.0")


def test_old_releases_that_err_are_halved_toward_the_bug_not_walked():
    fake = FakeReleases(fake_table(*[ERROR] * 8, PASSES, PASSES, BUG, BUG, BUG))
    found = bisect_releases("lib", list(fake.table), "1.12.0", fake)
    assert (found.first_bad, found.last_good) == ("1.10.0", "1.9.0")
    assert fake.ran == ["1.12.0", "1.0.0", "1.6.0", "1.9.0", "1.11.0", "1.10.0"]


def test_old_releases_that_err_below_a_bug_leave_present_since():
    fake = FakeReleases(fake_table(ERROR, ERROR, ERROR, BUG, BUG))
    found = bisect_releases("lib", list(fake.table), "1.4.0", fake)
    assert (found.first_bad, found.last_good, fake.ran) == ("1.3.0", "", ["1.4.0", "1.0.0", "1.2.0", "1.3.0"])


def test_every_older_release_erring_leaves_the_installed_present_since():
    fake = FakeReleases(fake_table(ERROR, ERROR, BUG))
    found = bisect_releases("lib", list(fake.table), "1.2.0", fake)
    assert (found.first_bad, found.last_good) == ("1.2.0", "")


def test_newer_releases_than_the_installed_run_after_the_search():
    fake = FakeReleases(fake_table(PASSES, BUG, BUG, PASSES))
    found = bisect_releases("lib", list(fake.table), "1.2.0", fake)
    assert fake.ran == ["1.2.0", "1.0.0", "1.1.0", "1.3.0"]
    assert (found.first_bad, found.last_good, found.runs[-1].outcome) == ("1.1.0", "1.0.0", PASSES)


@pytest.mark.parametrize("outcome", [PASSES, ERROR])
def test_not_shown_on_the_installed_stack_stops_at_once(outcome):
    fake = FakeReleases(fake_table(BUG, outcome))
    with pytest.raises(NotShown, match=rf"not shown on the installed stack \(lib 1.1.0: {outcome.value}, fake"):
        bisect_releases("lib", list(fake.table), "1.1.0", fake)
    assert fake.ran == ["1.1.0"]


# ---- the release plan -------------------------------------------------------------------------------------------

ORT_INDEX = ("1.32.0, 1.31.1, 1.31.0, 1.30.0, 1.29.0, 1.28.0, 1.27.0, 1.26.0, 1.25.1, 1.25.0, 1.24.4, 1.24.3, "
             "1.23.2, 1.22.1, 1.22.0, 1.21.1, 1.20.1, 1.19.2").split(", ")


def test_final_versions_drop_pre_dev_and_local_builds():
    assert [str(v) for v in final_versions(["2.0.0rc1", "1.9.0", "2.13.0+cpu", "1.10.0.dev3", "x", "1.9.0"])] == [
        "1.9.0"]


def test_the_plan_is_the_newest_release_of_each_minor_series_back_from_the_installed():
    plan = plan_releases("onnxruntime", ORT_INDEX, "1.32.0", series=4)
    assert plan.releases == ("1.28.0", "1.29.0", "1.30.0", "1.31.1", "1.32.0")
    assert (plan.installed, plan.newer) == ("1.32.0", ())


def test_the_plan_takes_releases_where_a_library_has_few_series_and_newer_ones_too():
    index = [f"0.1.{i}" for i in range(90, 99)] + ["0.0.9"]
    plan = plan_releases("onnxslim", index, "0.1.95", series=3)
    assert plan.releases == ("0.1.92", "0.1.93", "0.1.94", "0.1.95", "0.1.96", "0.1.97", "0.1.98")
    assert (plan.older, plan.newer) == (("0.1.92", "0.1.93", "0.1.94"), ("0.1.96", "0.1.97", "0.1.98"))


def completed(stdout: str = "", returncode: int = 0, stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], returncode, stdout, stderr)


def test_index_versions_reads_pips_answer_and_a_failure_is_one_line():
    answer = "onnxslim (0.1.98)\nAvailable versions: 0.1.98, 0.1.97\n  INSTALLED: 0.1.98\n"
    assert index_versions("onnxslim", lambda args, env=None: completed(answer)) == ("0.1.98", "0.1.97")
    failing = completed("", 1, "ERROR: No matching distribution found for nosuchlib")
    with pytest.raises(CannotRun, match="cannot list the releases of nosuchlib .*No matching distribution"):
        index_versions("nosuchlib", lambda args, env=None: failing)


def test_torch_is_tried_only_from_wheels_on_disk_and_one_is_not_enough(tmp_path):
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    (tmp_path / "numpy-2.0.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    config = completed(f"global.find-links='{tmp_path}'\n")
    assert available_versions("torch", lambda args, env=None: config) == ("2.13.0+cpu",)
    with pytest.raises(CannotRun, match="torch is not bisected here: .*multi-GB CUDA .*only 2.13.0 lies on"):
        releases_to_try("torch", "2.13.0+cpu", run=lambda args, env=None: config)


# ---- release environments ---------------------------------------------------------------------------------------

def planted_wheel(folder: Path, name: str, version: str, requires: Sequence[str] = ()) -> None:
    """What the fake pip "installs": a real importable package and its dist-info (a stand-in for a PyPI wheel)."""
    (folder / name).mkdir(parents=True)
    (folder / name / "__init__.py").write_text(f"__version__ = {version!r}\n")
    info = folder / f"{name}-{version}.dist-info"
    info.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}",
             *(f"Requires-Dist: {r}" for r in requires)]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


class FakePip:
    """A fake `pip install --target`: plants the asked packages from a table; every other command runs for real
    (the import check is a real python with the env first on PYTHONPATH)."""

    def __init__(self, table: Mapping[str, tuple[str, ...]], fail: str = "") -> None:
        self.table, self.fail, self.installs = table, fail, []

    def __call__(self, args: Sequence[str], env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
        if "pip" not in args:
            return subprocess.run(args, capture_output=True, text=True, env=dict(env or {}), check=False)
        target, specs = Path(args[args.index("--target") + 1]), args[args.index("--target") + 2:]
        self.installs.append(tuple(specs))
        for spec in specs:
            if spec == self.fail:
                return completed("", 1, f"ERROR: No matching distribution found for {spec}")
            name, _, version = spec.partition("==")
            name = name.split(">")[0]
            planted_wheel(target, name, version or "2.0", self.table.get(spec, ()))
        return completed()


def test_an_env_is_built_once_checked_for_real_and_reused(tmp_path):
    pip = FakePip({"planted_lib==1.5": ("planted_dep>=2", "numpy>=1", "other; python_version < '3'")})
    built = ensure_env(tmp_path, "planted_lib", "1.5", run=pip, have=lambda name: {"numpy": "2.4.6"}.get(name))
    assert built.path == env_path(tmp_path, "planted_lib", "1.5") == tmp_path.resolve() / "planted-lib-1.5"
    assert built.added == ("planted_dep>=2",)
    assert pip.installs == [("planted_lib==1.5",), ("planted_dep>=2",)]
    assert json.loads((built.path / MARKER).read_text())["version"] == "1.5"
    again = ensure_env(tmp_path, "planted_lib", "1.5", run=pip)
    assert (again, len(pip.installs)) == (built, 2)
    assert [p.name for p in tmp_path.iterdir()] == ["planted-lib-1.5"]  # no staging folder left
    imported = subprocess.run([sys.executable, "-c", "import planted_lib; print(planted_lib.__version__)"],
                              env=built.environ({}), capture_output=True, text=True, check=True).stdout
    assert imported == "1.5\n"


def test_a_release_that_will_not_install_leaves_nothing_behind(tmp_path):
    with pytest.raises(EnvError, match="pip install planted_lib==9.9 failed: ERROR: No matching distribution"):
        ensure_env(tmp_path, "planted_lib", "9.9", run=FakePip({}, fail="planted_lib==9.9"))
    assert list(tmp_path.iterdir()) == []


def test_a_folder_without_its_marker_is_rebuilt_never_reused(tmp_path):
    half = env_path(tmp_path, "planted_lib", "1.5")
    half.mkdir()
    (half / "leftover.py").write_text("")
    assert load_env(half) is None
    built = ensure_env(tmp_path, "planted_lib", "1.5", run=FakePip({}))
    assert sorted(p.name for p in built.path.iterdir()) == [MARKER, "planted_lib", "planted_lib-1.5.dist-info"]


def test_a_killed_builds_staging_folder_is_removed_once_stale(tmp_path):
    stale, fresh = tmp_path / ".tmp-planted-lib-1.5-old", tmp_path / ".tmp-planted-lib-1.5-new"
    for folder in (stale, fresh):
        folder.mkdir()
    os.utime(stale, (0, 0))
    ensure_env(tmp_path, "planted_lib", "1.5", run=FakePip({}))
    assert sorted(p.name for p in tmp_path.iterdir()) == [fresh.name, "planted-lib-1.5"]


def test_an_import_that_finds_another_release_is_an_error(tmp_path):
    def wrong_version(args, env=None):
        if "pip" in args:
            planted_wheel(Path(args[args.index("--target") + 1]), "planted_lib", "1.4")
        return FakePip({})(args, env) if "pip" not in args else completed()
    with pytest.raises(EnvError, match="import planted_lib found 1.4 at .*, not the release in"):
        ensure_env(tmp_path, "planted_lib", "1.5", run=wrong_version)
    assert list(tmp_path.iterdir()) == []


def test_unmet_requirements_evaluate_markers_and_specifiers():
    have = {"numpy": "2.4.6", "onnx": "1.23.2"}.get
    assert unmet(["numpy>=1.20", "onnx<1.20", "ml_dtypes", "x; extra == 'dev'", "bad req ["], have) == [
        "ml_dtypes", "onnx<1.20"]


# ---- which library, the record, the command ---------------------------------------------------------------------

def test_every_converter_declares_the_distribution_of_its_own_code():
    for converter in CONVERTERS.values():
        assert converter.distribution in converter.distributions, converter.name


def test_the_library_comes_from_the_blame_or_the_converters_component():
    slim, ort, dynamo = read_case(SLIM_CASE), read_case(ORT_CASE), read_case(DYNAMO_CASE)
    assert [blamed_distribution(c) for c in (slim, ort, dynamo)] == ["onnxslim", "onnxruntime", "torch"]
    assert blamed_distribution(dynamo, "onnxscript") == "onnxscript"
    kernel = Blame(Component("ONNX Runtime", "CPU kernel of `Mod`", "", "onnxruntime-kernel"), (), True, True)
    assert blamed_distribution(dataclasses.replace(dynamo, blame=kernel)) == "onnxruntime"  # an old blame
    named = Blame(Component("onnxscript", "onnxscript: x", "", "torch-onnx-dynamo", "onnxscript"), (), True)
    assert blamed_distribution(dataclasses.replace(dynamo, blame=named)) == "onnxscript"


def test_a_bisection_is_recorded_in_case_json_and_report_md(tmp_path):
    folder = Path(shutil.copytree(SLIM_CASE, tmp_path / SLIM_CASE.name))
    before = json.loads((folder / "case.json").read_text())
    found = Bisection("onnxslim", (ReleaseRun("0.1.90", PASSES), ReleaseRun("0.1.98", BUG, "ValueError")),
                      "0.1.98", "0.1.90")
    record_bisection(folder, found)
    after = json.loads((folder / "case.json").read_text())
    assert after == {**before, "bisection": found.to_json()}
    assert list(after)[-2:] == ["bisection", "files"]
    assert read_case(folder).bisection == found
    assert "## Since when\nA regression since onnxslim 0.1.98 (0.1.90 does not show it)." in (
        (folder / "report.md").read_text())


@pytest.mark.parametrize("args, message", [
    (["bisect", "no/such/case"], "not a case folder"),
    (["bisect", "--releases", "0", str(SLIM_CASE)], "--releases must be at least 1"),
    (["bisect", "--library", "no-such-dist-xyz", str(SLIM_CASE)], "no-such-dist-xyz is not installed"),
])
def test_bad_input_is_one_line_and_exit_2(args, message, capsys):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# ---- convsmith fuzz --bisect --------------------------------------------------------------------------------------

def fake_bisect_command(out: Path):
    """A stand-in for `convsmith bisect` (no network): records its niceness and the cases it was given."""
    code = ("import os, sys; open(sys.argv[1], 'a').write(f'{os.nice(0)} ' + ' '.join("
            "os.path.basename(p) for p in sys.argv[2:]) + chr(10))")
    return lambda cases: [sys.executable, "-c", code, str(out), *map(str, cases)]


def test_the_campaigns_bisections_wait_for_reduction_and_run_in_one_lowest_priority_process(tmp_path):
    ran = tmp_path / "ran.txt"
    queue = BisectQueue(tmp_path, command=fake_bisect_command(ran))
    first, second = tmp_path / "case-a", tmp_path / "case-b"
    for case in (first, second):
        case.mkdir()
        queue.add(case)
    queue.step(now=100.0)
    assert (queue.proc, queue.waiting) == (None, [first, second])
    (first / "case-a-reduced").mkdir()
    (first / "case-a-reduced" / "case.json").write_text("{}")  # a reduced case is published whole, case.json in it
    queue.step(now=101.0)  # polled at most every POLL_S
    assert queue.proc is None
    queue.step(now=100.0 + POLL_S)
    assert queue.proc is not None and queue.proc.wait(timeout=30) == 0
    (second / "case-b-reduced").mkdir()
    # A shape-only reduced case waits for its polish, which replaces its folder.
    (second / "case-b-reduced" / "case.json").write_text('{"reduction": {"polished": false}}')
    queue.step(now=100.0 + 2 * POLL_S)
    assert queue.waiting == [second]
    (second / "case-b-reduced" / "case.json").write_text('{"reduction": {"polished": true}}')
    queue.step(now=100.0 + 3 * POLL_S)
    assert queue.proc.wait(timeout=30) == 0
    assert ran.read_text() == f"{BISECT_NICE} case-a-reduced\n{BISECT_NICE} case-b-reduced\n"
    queue.add(tmp_path / "case-c")
    queue.close()
    assert (tmp_path / "bisect.log").read_text() == (
        f"{tmp_path / 'case-c'}: not bisected (run `convsmith bisect` on its reduced case)\n")


def test_a_runs_detail_is_what_repro_py_observed():
    divergence = "at the shape:\n  ok   t0: 0 of 2\n  BAD  t1: 2 of 2 out\n    observed: [0.8]\nBUG REPRODUCES\n"
    assert repro_detail(divergence, "W warning\n") == "BAD  t1: 2 of 2 out"
    crash = "observed: ValueError: no axes\nexpected: it runs\nBUG REPRODUCES\n"
    assert repro_detail(crash, "Traceback\nValueError: no axes\n") == "ValueError: no axes"
    assert repro_detail("", "repro.py: cannot run: no x\n") == "repro.py: cannot run: no x"
