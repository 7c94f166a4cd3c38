"""An endless recursion in a converter is a crash with RecursionError, in a campaign's worker and in the reducer's
checker alike, even where the converter's library lifted the recursion limit on import (onnx2tf does): unbounded,
it ran the process out of its address space and was filed as out of memory (a MemoryError) or, as this planted one
was, as a crash with CPython's "SystemError: error return without exception set".

`PlantedEndlessRecursion` is a registry entry loaded by reference (`--registry`-style), planted for the test; its
library is tests/planted_recursion_library.py."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_isolation import run_campaign

from fuzzer.converters import ConverterRegistry
from fuzzer.converters.base import Converter
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.options import ConverterOptions
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
from fuzzer.support.confine import RECURSION_LIMIT
from generators.generator import GenOptions, generate
from oracles.verdict import Stage, Symptom

LIBRARY = "planted_recursion_library"
TESTS = Path(__file__).parent
ROOT = TESTS.parent


def descend(depth: int, held: bytes = b"") -> int:
    """Recurses for ever, each level holding 16 KiB as real code holds its nodes and lists: unbounded, the heap
    runs out first (MemoryError)."""
    return descend(depth + 1, bytes(16384)) + len(held)


class PlantedEndlessRecursion(Converter):
    """A converter whose node conversion recurses without end, after importing its library (which lifts the limit)."""

    name = "planted-endless-recursion"
    libraries = (LIBRARY,)
    distributions = ()
    options_type = ConverterOptions

    def convert_impl(self, source: Source, options: ConverterOptions) -> TargetRun:
        importlib.import_module(LIBRARY)  # as converters import theirs: on first use, if the fork server did not
        with Steps().at(Stage.NODE_CONVERSION, "convert"):
            descend(0)
        raise AssertionError("unreachable")


REGISTRY = ConverterRegistry([PlantedEndlessRecursion()])


def assert_recursion(symptom: str, signature: str, message: str) -> None:
    crash = Symptom.CRASH.name.lower()
    assert (symptom, message.split(":")[0]) == (crash, "builtins.RecursionError"), (symptom, message)
    assert signature.startswith("crash-planted-endless-recursion-node_conversion-RecursionError-"), signature


@pytest.mark.slow
def test_endless_recursion_in_a_worker_is_a_recursion_crash(tmp_path: Path) -> None:
    db = run_campaign(tmp_path, ("planted-endless-recursion",), 1, "test_recursion_verdict:REGISTRY", workers=1,
                      timeout_s=60.0, memory_mb=512)
    rows = db.conn.execute("SELECT symptom, signature, message FROM tests").fetchall()
    assert len(rows) == 1
    assert_recursion(*rows[0])


@pytest.mark.slow
def test_endless_recursion_in_the_reducers_checker_is_a_recursion_crash(tmp_path: Path) -> None:
    config = CheckerConfig(registry="test_recursion_verdict:REGISTRY", timeout_s=60.0, memory_mb=512,
                           log_dir=str(tmp_path))
    job = Job(generate(100, GenOptions(nodes=3)), 100, "planted-endless-recursion", {})
    with IsolatedChecker(config) as checker:
        verdict = checker.verdict(job)
    assert_recursion(verdict.symptom.name.lower(), verdict.signature, verdict.message)


def test_a_library_cannot_lift_the_bounded_recursion_limit() -> None:
    """Run in a child: bounding the limit changes the process for good."""
    code = ("import sys; from fuzzer.support.confine import bound_recursion; bound_recursion(); "
            f"import {LIBRARY}; print(sys.getrecursionlimit())")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ, PYTHONPATH=f"{ROOT}:{TESTS}"),
                          capture_output=True, text=True, check=True)
    assert int(done.stdout) == RECURSION_LIMIT
