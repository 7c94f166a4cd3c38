"""The locked stack: the lock parses, names every library under test, and agrees with what is installed here;
`convsmith converters` prints it, mismatches marked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fuzzer.commands.main import main
from fuzzer.converters import CONVERTERS
from fuzzer.converters.stack import libraries_under_test, mismatches, stack_rows
from fuzzer.support.errors import Exit, UsageError
from fuzzer.support.lock import PACKAGE_LOCK, active_lock, agrees, canonical, parse_lock, read_lock, write_lock

# The issue names these (but onnx2torch, no longer offered); the registry's distributions plus COMMON must cover them.
NAMED_IN_THE_ISSUE = ("torch", "onnx", "onnxruntime", "onnxscript", "onnx-ir", "onnxsim", "onnxslim", "onnxoptimizer",
                      "numpy", "protobuf", "ml_dtypes")


def test_the_lock_parses_and_pins_every_library_under_test() -> None:
    pins = read_lock(PACKAGE_LOCK)
    assert len(pins) > 30 and "convsmith" not in pins and "pip" not in pins
    assert [n for n in libraries_under_test() if n not in pins] == []
    assert {canonical(n) for n in NAMED_IN_THE_ISSUE} <= set(libraries_under_test())


def test_every_converters_distributions_are_under_test() -> None:
    """A new converter's library joins the stack by its class's `distributions`, nothing else."""
    for conv in CONVERTERS.values():
        assert {canonical(d) for d in conv.distributions} <= set(libraries_under_test()), conv.name


def test_the_installed_versions_agree_with_the_lock() -> None:
    rows = stack_rows(read_lock(active_lock()), libraries_under_test())
    bad = mismatches(rows)
    assert not bad, f"installed versions differ from {active_lock()} (`make install` installs it): " + "; ".join(bad)


def test_a_mismatch_names_the_library_locked_and_installed() -> None:
    rows = stack_rows({"numpy": "0.0.1", "onnx": read_lock(active_lock())["onnx"]}, ("numpy", "onnx", "not-a-dist"))
    installed = rows[0].installed
    assert mismatches(rows) == [f"numpy: locked 0.0.1, installed {installed}", "not-a-dist: locked nothing, "
                                "installed nothing"]


def test_a_local_label_is_ignored_as_pip_ignores_it() -> None:
    assert agrees("2.13.0", "2.13.0+cpu") and agrees("2.13.0+cpu", "2.13.0")
    assert not agrees("2.13.0", "2.13.1") and not agrees("2.13.0", None)


def test_the_lock_round_trips_and_bad_lines_are_one_line_errors(tmp_path: Path) -> None:
    write_lock(tmp_path / "x.lock", {"torch": "2.13.0", "ml-dtypes": "0.7.0"})
    assert read_lock(tmp_path / "x.lock") == {"ml-dtypes": "0.7.0", "torch": "2.13.0"}
    assert parse_lock("# c\n\nML_Dtypes==0.7.0  # why\n") == {"ml-dtypes": "0.7.0"}
    with pytest.raises(UsageError, match=r"^x:2: expected a pin 'name==version', got 'torch>=2'$"):
        parse_lock("onnx==1\ntorch>=2\n", "x")
    with pytest.raises(UsageError, match="onnx is pinned twice"):
        parse_lock("onnx==1\nONNX==2\n")
    with pytest.raises(UsageError, match="cannot read the lock"):
        read_lock(tmp_path / "missing.lock")


def test_converters_prints_the_stack(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["converters"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stack (lock: "))
    rows = [line.split() for line in lines[start + 1:]]
    assert [row[0] for row in rows] == list(libraries_under_test())
    lock = read_lock(active_lock())
    assert all(row[1:3] == ["locked", lock[row[0]]] and row[3] == "installed" and len(row) == 5 for row in rows)


def test_converters_marks_a_mismatch_in_text_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pins = read_lock(active_lock()) | {"onnx": "0.0.1"}
    write_lock(tmp_path / "old.lock", pins)
    assert main(["converters", "--lock", str(tmp_path / "old.lock")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if line.endswith("MISMATCH")] == ["onnx"]
    assert lines[-1] == f"1 of {len(libraries_under_test())} libraries differ from the lock: `make install` installs it"
    assert main(["converters", "--lock", str(tmp_path / "old.lock"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [row["library"] for row in data["stack"]["libraries"] if not row["agrees"]] == ["onnx"]
    assert [row["name"] for row in data["converters"]] == list(CONVERTERS)


def test_converters_with_a_missing_lock_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["converters", "--lock", str(tmp_path / "none.lock")]) == Exit.USAGE
    assert capsys.readouterr().err.startswith("convsmith converters: cannot read the lock ")
