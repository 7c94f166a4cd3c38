"""A case whose worker died replays alone, and no case file carries the finder's paths.

The fault is planted through the registry (`test_lost_cases:ABORT_REGISTRY`): an ONNX tool that aborts its process
on any model holding a `Sin` node, whose report snippet does the same, so its repro.py shows the death on its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from fuzzer.campaign.db import DB_NAME, CampaignDB
from fuzzer.campaign.loop import Campaign
from fuzzer.campaign.spec import LOG_DIR, CampaignSpec, case_folders
from fuzzer.campaign.worker_config import WorkerConfig
from fuzzer.cases.folder import read_case
from fuzzer.cases.report import title
from fuzzer.commands import main as cli
from fuzzer.converters import ConverterRegistry
from fuzzer.converters.describe import Snippet
from fuzzer.converters.options import ConverterOptions
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.reduce.isolated import CheckerConfig, IsolatedChecker, Job
from generators.builder import GraphBuilder
from generators.dtypes import DType
from oracles.paths import PROJECT_ROOT, portable


class AbortOnSin(OnnxPassConverter):
    """An ONNX tool with a native crash in one operator: it aborts on a model holding a Sin node."""

    name = "faulty-abort-on-sin"
    libraries = ("onnxruntime",)
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = UpstreamOptions

    def transform(self, model: onnx.ModelProto, options: ConverterOptions) -> onnx.ModelProto:
        if any(node.op_type == "Sin" for node in model.graph.node):
            os.abort()
        return model

    def snippet(self, options: ConverterOptions) -> Snippet:
        return Snippet(("import os",), ("if any(node.op_type == 'Sin' for node in model.graph.node):",
                                        "    os.abort()"))


ABORT_REGISTRY = ConverterRegistry([AbortOnSin()])
REGISTRY_REF = "test_lost_cases:ABORT_REGISTRY"


def run_alone(folder: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The case folder copied away from the project, its repro.py run there in an isolated interpreter."""
    alone = tmp / "alone" / folder.name
    shutil.copytree(folder, alone)
    return subprocess.run([sys.executable, "-I", "repro.py"], cwd=alone, capture_output=True, text=True,
                          timeout=300)


def finder_paths() -> list[str]:
    """The absolute paths a case must not carry: the project, its virtualenv, the home folder."""
    return sorted({str(PROJECT_ROOT), sys.prefix, str(Path.home())} - {"/", ""})


def assert_no_finder_paths(folder: Path) -> None:
    for name in ("report.md", "repro.py", "case.json"):
        text = (folder / name).read_text(encoding="utf-8")
        for path in finder_paths():
            assert path not in text, f"{folder.name}/{name} names {path}"


@pytest.mark.slow
def test_a_campaign_case_of_a_dead_worker_replays_alone_and_names_no_path(tmp_path: Path, capsys) -> None:
    out = tmp_path / "campaign"
    worker = WorkerConfig(out_dir=str(out), log_dir=str(out / LOG_DIR), registry=REGISTRY_REF, min_nodes=2, nodes=3,
                          include_ops=("sin", "relu", "neg"), timeout_s=30.0, check={"input_budget_s": 0.2},
                          converters=(AbortOnSin.name,))
    spec = CampaignSpec(300, (AbortOnSin.name,), worker, 6)
    out.mkdir(parents=True)
    db = CampaignDB(out / DB_NAME, create=True)
    db.set_meta("spec", spec.to_json())
    assert Campaign(out, spec, db, 1).run() == "finished"
    symptoms = [s for (s,) in db.conn.execute("SELECT symptom FROM tests")]
    assert "process_death" in symptoms
    folders = case_folders(out)
    assert folders and all(read_case(f).verdict.symptom.json_name == "process_death" for f in folders)
    for folder in folders:
        assert (folder / "test_data_set_0" / "input_0.pb").is_file()
        assert_no_finder_paths(folder)
        case = read_case(folder)
        assert "`unknown`" not in title(case) and "…" not in title(case).split(":", 1)[0]
        assert case.blame is not None and case.blame.component.key == AbortOnSin.name  # from the death's stack
        ran = run_alone(folder, tmp_path)
        assert ran.returncode == 1, ran.stdout[-2000:] + ran.stderr[-2000:]
        assert "killed by SIGABRT" in ran.stdout and "BUG REPRODUCES" in ran.stdout
    # `convsmith repro` replays a death in a confined child, as the campaign ran it, and survives it.
    assert cli.main(["repro", str(folders[0]), "--registry", REGISTRY_REF]) == 1
    assert capsys.readouterr().out.strip() == f"{folders[0].name}: reproduces"


@pytest.mark.slow
def test_a_reduced_case_of_a_dead_child_replays_alone(tmp_path: Path) -> None:
    b = GraphBuilder()
    x = b.input((3, 4), DType.FLOAT32)
    y = b.op("sin", (x,), (3, 4))
    job = Job(b.build((y,)), 7, AbortOnSin.name, {"upstream": "torch-onnx-script", "opset": 17})
    with IsolatedChecker(CheckerConfig(registry=REGISTRY_REF, timeout_s=60.0)) as checker:
        folder, verdict = checker.write_case(job, tmp_path / "cases", "sin-abort-reduced", None, None)
    assert verdict.symptom.json_name == "process_death"
    assert (folder / "test_data_set_0" / "input_0.pb").is_file()
    assert "`sin`" in title(read_case(folder))
    assert read_case(folder).blame is not None  # from the death's stack, with no rerun
    ran = run_alone(folder, tmp_path)
    assert ran.returncode == 1, ran.stdout[-2000:] + ran.stderr[-2000:]


@pytest.mark.parametrize("text,shown", [
    (f"{sys.prefix}/lib/python3.11/site-packages/torch/onnx/utils.py:684 in _export",
     "torch/onnx/utils.py:684 in _export"),
    (f'File "{PROJECT_ROOT}/generators/ops/norm.py", line 196, in forward',
     'File "repro.py (Repro.forward)", in forward'),
    (f"traced at {PROJECT_ROOT}/generators/ops/norm.py:196", "traced at repro.py (Repro.forward)"),
    (f"see {Path.home()}/notes.txt", "see ~/notes.txt"),
    ("node /Conv_1 has no input", "node /Conv_1 has no input"),
])
def test_paths_are_shown_relative_to_their_owner(text: str, shown: str) -> None:
    assert portable(text) == shown
