"""Adding a converter is its own class and one registry entry, and nothing else: a throwaway exporter and a throwaway
ONNX tool, each planting one fault (Sin written as Cos), declared here and registered beside the real converters
(`test_new_converter:REGISTRY`, passed as `--registry`), are taken by a campaign, its reduction, `convsmith check`,
their cases' repro.py run alone, the cross-checks, `convsmith report` and the root causes, with no table elsewhere
naming them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import onnx
import pytest

from fuzzer.campaign.spec import case_folders
from fuzzer.converters import CONVERTERS, Converter, ConverterRegistry, Role
from fuzzer.converters.capabilities import AvoidsBugs, ExportsUpstream, Snippets
from fuzzer.converters.conversion import Source, Steps, TargetRun
from fuzzer.converters.describe import Snippet
from fuzzer.converters.dynamic import DynamicAxes
from fuzzer.converters.runtime import check_and_serialize, run_model
from fuzzer.converters.torch_onnx_script import ScriptOptions, export_script
from fuzzer.converters.upstream import OnnxPassConverter, UpstreamOptions
from fuzzer.support.errors import Exit

TESTS = Path(__file__).parent
ROOT = TESTS.parent
# The planted fault, as a script writes it too (the converters' snippets end with it).
FLIP = ("for node in model.graph.node:", "    node.op_type = 'Cos' if node.op_type == 'Sin' else node.op_type")


def planted_flip(model: onnx.ModelProto) -> onnx.ModelProto:
    """Every Sin node made a Cos: a consistent model that computes the wrong function."""
    for node in model.graph.node:
        node.op_type = "Cos" if node.op_type == "Sin" else node.op_type
    return model


class PlantedExporter(Converter[ScriptOptions]):
    """A throwaway PyTorch exporter (planted): torch.onnx's TorchScript export, then every Sin made a Cos."""

    name = "planted-sin-exporter"
    role = Role.EXPORTER
    framework = "pytorch"
    runtime = "onnxruntime"
    repro_conversion = "export_and_run_snippet"  # its repro.py exports as its snippet does, fault included
    libraries = ("torch", "onnx", "onnxruntime")
    distributions = ("torch", "onnx", "onnxruntime")
    options_type = ScriptOptions

    def snippet(self, options: ScriptOptions, dynamic: DynamicAxes | None = None) -> Snippet:
        return Snippet(("import io", "import onnx", "import torch"), (
            "buffer = io.BytesIO()",
            f"torch.onnx.export(module, inputs, buffer, dynamo=False, opset_version={options.opset}, "
            "input_names=INPUT_NAMES)",
            "model = onnx.load_from_string(buffer.getvalue())", *FLIP), from_torch=True)

    def convert_impl(self, source: Source, options: ScriptOptions) -> TargetRun:
        steps = Steps()
        model = export_script(source, options, steps)
        with steps.at(self.divergence_stage, "plant"):
            model = planted_flip(model)
        data = check_and_serialize(model, steps)
        outputs, dtypes = run_model(data, source, steps)
        return TargetRun(outputs, dtypes, dict(steps.timings), model=data)


@dataclass(frozen=True)
class PlantedToolOptions(UpstreamOptions):
    """The upstream and its opset: the throwaway tool has no options of its own."""


class PlantedTool(OnnxPassConverter[PlantedToolOptions]):
    """A throwaway ONNX-to-ONNX pass (planted): it makes every Sin a Cos."""

    name = "planted-sin-tool"
    role = Role.ONNX_TOOL
    framework = "onnx"
    runtime = "onnxruntime"
    libraries = ("onnx", "onnxruntime")
    distributions = ("onnx", "onnxruntime")
    options_type = PlantedToolOptions

    def snippet(self, options: PlantedToolOptions) -> Snippet:
        return Snippet((), FLIP)

    def transform(self, model: onnx.ModelProto, options: PlantedToolOptions) -> onnx.ModelProto:
        return planted_flip(model)


REGISTRY = ConverterRegistry([*CONVERTERS.values(), PlantedExporter(), PlantedTool()])
PLANTED = (PlantedExporter.name, PlantedTool.name)
ENV = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{TESTS}")


def convsmith(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuzzer", *args], capture_output=True, text=True, timeout=600,
                          stdin=subprocess.DEVNULL, env=ENV, cwd=cwd)


def run_alone(folder: Path, into: Path) -> subprocess.CompletedProcess:
    """The folder's repro.py, copied to an empty folder, run without this project on the path."""
    shutil.copytree(folder, into)
    boot = f"import sys, runpy; sys.path.append({sysconfig.get_paths()['purelib']!r}); " \
           "runpy.run_path('repro.py', run_name='__main__')"
    return subprocess.run([sys.executable, "-I", "-S", "-c", boot], cwd=into, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin"}, timeout=300)


def test_the_throwaway_converters_declare_what_the_rest_reads() -> None:
    assert [c.name for c in REGISTRY.of_role(Role.EXPORTER)][-1] == PlantedExporter.name
    assert REGISTRY[PlantedTool.name].role.starts_upstream
    assert not isinstance(REGISTRY[PlantedExporter.name], ExportsUpstream)  # it exports no model for the ONNX tools
    assert isinstance(REGISTRY[PlantedTool.name], Snippets) and not isinstance(REGISTRY[PlantedTool.name], AvoidsBugs)
    assert PlantedTool.options_type().to_json() == {"upstream": "torch-onnx-script", "opset": 17}


@pytest.mark.slow
def test_a_new_exporter_and_onnx_tool_go_through_campaign_check_reduce_repro_and_report(tmp_path: Path) -> None:
    out = tmp_path / "c"
    done = convsmith("fuzz", "--tests", "2", "--workers", "1", "--registry", "test_new_converter:REGISTRY",
                     "--converters", ",".join(PLANTED), "--ops", "sin", "--dtypes", "float32", "--nodes", "2",
                     "--settings", "default", "--out", str(out), "--reduce-time", "30s")
    assert done.returncode == Exit.OK, done.stderr[-2000:]
    folders = {json.loads((f / "case.json").read_text())["converter"]: f for f in case_folders(out)}
    assert sorted(folders) == sorted(PLANTED)
    for name, folder in folders.items():
        reduced = [p for p in folder.iterdir() if p.name.endswith("-reduced")]
        assert len(reduced) == 1, (name, sorted(p.name for p in folder.iterdir()))
        case = json.loads((reduced[0] / "case.json").read_text())
        assert (case["verdict"]["symptom"], case["verdict"]["diverging_op"]) == ("wrong_values", "sin"), name
        assert [n["op"] for n in case["graph"]["nodes"]] == ["sin"], name
        shown = run_alone(reduced[0], tmp_path / f"alone-{name}")
        assert shown.returncode == Exit.BUG, (name, shown.stdout[-1500:], shown.stderr[-1500:])
        graph = tmp_path / f"{name}.json"
        graph.write_text(json.dumps(case["graph"]))
        checked = convsmith("check", str(graph), "--registry", "test_new_converter:REGISTRY",
                            "--converters", name)
        assert checked.returncode == Exit.BUG and "wrong_values" in checked.stdout, (name, checked.stdout[-1500:])

    report = convsmith("report", str(out))
    assert report.returncode == Exit.OK, report.stderr[-2000:]
    causes = sorted(p.name for p in (out / "root-causes").iterdir())
    # One root cause per planted converter, each named by it (squashed), on the operator it breaks.
    assert [cause.rsplit("-", 1)[0] for cause in causes] == ["rc-planted_sin_exporter-wrong_values-sin",
                                                             "rc-planted_sin_tool-wrong_values-sin"], causes
