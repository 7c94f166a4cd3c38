"""The command line keeps its word: --version, help with defaults and exit statuses, one line and the right
exit status for each bad input with nothing created, JSON for scripts, and no traceback into a closed pipe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import hand_graphs
import pytest

from fuzzer.commands.main import COMMANDS, main
from fuzzer.support.errors import Exit

# (argv, exit status, a word the one line must hold); GRAPH stands for a valid graph.json.
BAD_INPUTS = [
    (["fuzz", "--tests", "0", "--out", "c"], Exit.USAGE, "--tests"),
    (["fuzz", "--memory-mb", "0", "--out", "c"], Exit.USAGE, "--memory-mb"),
    (["fuzz", "--min-nodes", "5", "--nodes", "3", "--out", "c"], Exit.USAGE, "--min-nodes 5 is above --nodes 3"),
    (["fuzz", "--time=-5m", "--out", "c"], Exit.USAGE, "not a duration"),
    (["fuzz", "--time", "0s", "--out", "c"], Exit.USAGE, "must be positive"),
    (["fuzz", "--time", "10", "--out", "c"], Exit.USAGE, "not a duration"),
    (["fuzz", "--timeout=-1s", "--out", "c"], Exit.USAGE, "--timeout"),
    (["fuzz", "--reduce-time", "-1m", "--out", "c"], Exit.USAGE, "--reduce-time"),
    (["fuzz", "--converters", "nosuch", "--out", "c"], Exit.USAGE, "unknown converter(s): nosuch"),
    (["fuzz", "--device", "tpu", "--out", "c"], Exit.USAGE, "unknown device"),
    (["fuzz", "--resume", "nowhere"], Exit.USAGE, "no such campaign folder"),
    (["probe", "--time=-1m"], Exit.USAGE, "not a duration"),
    (["probe", "--converters", "nosuch"], Exit.USAGE, "unknown converter(s): nosuch"),
    (["reduce", "case", "--time=-1s"], Exit.USAGE, "not a duration"),
    (["reduce", "nowhere"], Exit.USAGE, "no such directory"),
    (["reduce", "case", "--log-dir", "/dev/null/logs"], Exit.USAGE, "--log-dir /dev/null/logs: Not a directory"),
    (["check", "GRAPH", "--converters", "torch-onnx-script", "--option", "opset=999"], Exit.USAGE, "opset=999"),
    (["check", "GRAPH", "--converters", "ort-optimizer", "--option", "level=max"], Exit.USAGE, "level='max'"),
    (["check", "GRAPH", "--converters", "torch-onnx-script", "--option", "nosuch=1"], Exit.USAGE, "nosuch"),
    (["check", "GRAPH", "--converters", "nosuch"], Exit.USAGE, "unknown converter(s): nosuch"),
    (["check", "missing.json", "--converters", "torch-onnx-script"], Exit.USAGE, "cannot read missing.json"),
    (["check", ".", "--converters", "torch-onnx-script"], Exit.USAGE, "cannot read case.json"),
    (["check", "BINARY", "--converters", "torch-onnx-script"], Exit.USAGE, "not a text file"),
    (["check", "model.onnx"], Exit.USAGE, "model.onnx: not a valid ONNX model"),
    (["ops", "--family", "nosuch"], Exit.USAGE, "unknown family 'nosuch'"),
    (["generate", "--seed", "1", "--out", "g", "--nodes", "0"], Exit.USAGE, "--nodes"),
    (["status", "nowhere"], Exit.USAGE, "no such campaign folder"),
    (["repro", "nowhere"], Exit.USAGE, "not a case folder"),
    (["nosuch"], Exit.USAGE, "invalid choice"),
]


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("argv, status, needle", BAD_INPUTS, ids=[" ".join(row[0])[:60] for row in BAD_INPUTS])
def test_bad_input_gets_one_line_and_its_status_and_creates_nothing(
        argv: list[str], status: int, needle: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    graph = tmp_path / "graph.json"
    graph.write_text(hand_graphs.elementwise().dumps())
    (tmp_path / "model.bin").write_bytes(b"\x08\xc1\xff")
    (tmp_path / "model.onnx").write_bytes(b"\x08\xc1\xff")
    before = _tree(tmp_path)
    argv = [str(graph) if a == "GRAPH" else "model.bin" if a == "BINARY" else a for a in argv]
    with pytest.raises(SystemExit) as exited:
        sys.exit(main(argv))
    err = capsys.readouterr().err
    assert exited.value.code == status, err
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err, err
    assert _tree(tmp_path) == before


@pytest.mark.slow
def test_version() -> None:
    out = subprocess.run([sys.executable, "-m", "fuzzer", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("convsmith ") and out.stdout.split()[1][0].isdigit()


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_shows_defaults_and_exit_statuses(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    assert "exit status:" in out and "3  could not run here" in out
    if command in ("fuzz", "probe", "reduce", "check", "generate"):
        assert "(default: " in out


def test_durations_have_one_form() -> None:
    from fuzzer.commands.flags import duration

    assert [duration(t) for t in ("90s", "10m", "2h", "1.5h", ".5m")] == [90.0, 600.0, 7200.0, 5400.0, 30.0]


@pytest.mark.parametrize("command", (["ops"], ["converters"]))
def test_json_for_scripts(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = data["converters"] if command == ["converters"] else data  # converters: beside the stack (test_stack.py)
    assert rows and all("name" in row for row in rows)


PLANTED = "test_reduce_isolated:PLANTED_EXPORTER"  # an exporter that writes every Sin as Cos


def test_check_exit_1_when_a_bug_shows_0_when_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A planted exporter's wrong Sin exits 1 under check (JSON for scripts); a graph without Sin exits 0."""
    g = hand_graphs.GraphBuilder()
    x = g.input((2, 3))
    (tmp_path / "bug.json").write_text(g.build((g.op("sin", (x,), (2, 3)),)).dumps())
    status = main(["check", str(tmp_path / "bug.json"), "--converters", "planted-sin-exporter", "--registry", PLANTED,
                   "--json"])
    verdicts = json.loads(capsys.readouterr().out)
    assert status == Exit.BUG and [(v["symptom"], v["converter"]) for v in verdicts] == \
           [("wrong_values", "planted-sin-exporter")]
    (tmp_path / "ok.json").write_text(hand_graphs.elementwise().dumps())
    assert main(["check", str(tmp_path / "ok.json"), "--converters", "planted-sin-exporter", "--registry",
                 PLANTED]) == Exit.OK
    assert capsys.readouterr().out.startswith("planted-sin-exporter: pass at none")


def test_check_takes_a_case_folder_or_its_case_json_with_the_cases_seed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    g = hand_graphs.GraphBuilder()
    x = g.input((2, 3))
    case = {"schema_version": 1, "id": "c", "signature": "s", "seed": 7,
            "graph": g.build((g.op("sin", (x,), (2, 3)),)).to_json()}
    (tmp_path / "case.json").write_text(json.dumps(case))
    for path in (tmp_path, tmp_path / "case.json"):
        assert main(["check", str(path), "--converters", "planted-sin-exporter", "--registry", PLANTED,
                     "--json"]) == Exit.BUG
        assert [v["seed"] for v in json.loads(capsys.readouterr().out)] == [7]
    (tmp_path / "case.json").write_text(json.dumps({**case, "graph": {"schema_version": 1}}))
    assert main(["check", str(tmp_path), "--converters", "planted-sin-exporter", "--registry", PLANTED]) == Exit.USAGE
    assert "case.json: the case graph: " in capsys.readouterr().err


def test_check_refuses_a_converter_its_registry_lacks_and_a_registry_that_does_not_load(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ok.json").write_text(hand_graphs.elementwise().dumps())
    assert main(["check", str(tmp_path / "ok.json"), "--converters", "onnxsim", "--registry", PLANTED]) == Exit.USAGE
    assert "unknown converter(s): onnxsim (known: planted-sin-exporter)" in capsys.readouterr().err
    assert main(["check", str(tmp_path / "ok.json"), "--converters", "x", "--registry", "no_such_module:R"]) == \
           Exit.USAGE
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.slow
def test_no_traceback_into_a_closed_pipe() -> None:
    done = subprocess.run(f"{sys.executable} -m fuzzer ops | head -1", shell=True, capture_output=True, text=True)
    assert done.stdout.count("\n") == 1 and done.stderr == "", done.stderr
