"""repro.py stands alone and shows each corpus bug; bad case folders give one line and a non-zero exit; replay
outcomes map to the documented exit statuses."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import pytest
from hand_graphs import elementwise
from test_crosscheck import CrashingSlim
from test_whose_bug import SinAsCosExporter, one_op

from fuzzer.cases.case import CaseData
from fuzzer.cases.folder import read_case
from fuzzer.cases.repro import identifier, imported_libraries, render_module, render_repro
from fuzzer.commands import main as cli
from fuzzer.converters import CONVERTERS, Converter, ConverterRegistry
from generators.ir import Graph
from generators.materialize import materialize, random_inputs
from oracles.verdict import Stage, Symptom, Verdict

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.parent for p in CORPUS.glob("*/case.json"))
KNOWN_BUGS = [c for c in CASES if read_case(c).expectation == "bug"]  # a must-pass case has no bug to show
WITH_MODEL = next(c for c in CASES if (c / "model.onnx").exists())  # the case the bad-input tests break

# Runs every repro.py in one interpreter that has the venv's site-packages on its path but not the project:
# -I (no user site, no cwd, no PYTHON* variables), -S (no .pth files, so the editable install's finder is not
# loaded); site-packages is appended by hand.
BOOT = r"""
import contextlib, io, json, os, runpy, sys
sys.path.append(SITE)


class BlockTorch:  # the cases of ONNX-to-ONNX converters must reproduce from upstream.onnx without torch
    def find_spec(self, name, path=None, target=None):
        if BLOCK_TORCH and (name == "torch" or name.startswith("torch.")):
            raise ImportError("torch is blocked: this repro.py must not need it")


sys.meta_path.insert(0, BlockTorch())
try:
    import generators  # noqa: F401
    leaked = True
except ImportError:
    leaked = False
results = {}
for folder in FOLDERS:
    os.chdir(folder)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            runpy.run_path("repro.py", run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code
    results[os.path.basename(folder)] = [code, out.getvalue()]
print("REPORT " + json.dumps({"leaked": leaked, "results": results}))
"""


def test_corpus_is_populated_with_distinct_signatures() -> None:
    signatures = [read_case(c).signature for c in CASES]
    assert len(CASES) >= 10 and len(set(signatures)) == len(signatures)


def test_rendered_module_computes_what_the_graph_module_computes() -> None:
    """The rendered source of each corpus graph, run in plain torch, equals the convsmith module bit for bit."""
    for folder in CASES + [None]:
        _assert_rendered_module_matches(read_case(folder).graph if folder else elementwise())


@pytest.mark.parametrize("op", ["split", "chunk", "tensor_split", "unbind"])
def test_a_one_piece_split_renders_its_one_output_unpacked(op: str) -> None:
    """These ops return a tuple even when it holds one output; the rendered line unpacks it (it had assigned the
    tuple, and repro.py failed before showing the bug)."""
    from generators.generator import GenOptions, generate

    graph = next(g for g in (generate(seed, GenOptions(nodes=1, include_ops=(op,))) for seed in range(300))
                 if len(g.nodes[0].outputs) == 1)
    assert f"{identifier(graph.nodes[0].outputs[0])}, = " in render_module(graph)
    _assert_rendered_module_matches(graph)


def _assert_rendered_module_matches(graph: Graph) -> None:
    import torch

    module = materialize(graph, 0)
    scope: dict = {"torch": torch, "load_tensor": None, "_register": lambda m, n, v: m.register_buffer(n, v)}
    exec(render_module(graph).replace("load_tensor('weights/", "WEIGHTS[('").replace(".pb')", "')]"),
         {**scope, "WEIGHTS": {w: getattr(module, w).detach() for w in graph.weights}}, scope)
    inputs = tuple(random_inputs(graph, 0).values())
    with torch.no_grad():
        for ours, theirs in zip(scope["Repro"]()(*inputs), module(*inputs), strict=True):
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            assert torch.equal(ours.nan_to_num(0.5), theirs.nan_to_num(0.5)), graph.ops()


ONNX_TOOL_CASES = [c for c in CASES if CONVERTERS[read_case(c).converter].role.starts_upstream]


@pytest.mark.slow
@pytest.mark.parametrize("block_torch", [False, True], ids=["every case", "onnx-to-onnx cases without torch"])
def test_repro_scripts_stand_alone_and_show_the_bug(tmp_path: Path, block_torch: bool) -> None:
    folders = []
    for case in ONNX_TOOL_CASES if block_torch else KNOWN_BUGS:
        shutil.copytree(case, tmp_path / case.name)
        folders.append(str(tmp_path / case.name))
    assert folders
    site = sysconfig.get_paths()["purelib"]
    code = f"SITE = {site!r}\nFOLDERS = {folders!r}\nBLOCK_TORCH = {block_torch!r}\n" + BOOT
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("REPORT ")][-1]
    report = json.loads(line[len("REPORT "):])
    assert report["leaked"] is False
    fixed = []
    for name, (status, text) in report["results"].items():
        if status == 0 and fixed_here(tmp_path / name):
            fixed.append(name)
            continue
        assert status == 1, f"{name}: {text[-1500:]}"
        assert "BUG REPRODUCES" in text and "observed:" in text, f"{name}: {text[-1500:]}"
    if fixed:  # an upstream fix: said in the run's summary, never passed over in silence
        warnings.warn(UpstreamFixed(f"repro.py shows no bug any more on the installed stack: {', '.join(fixed)}; "
                                    "re-promote each with --expect pass or delete it"), stacklevel=1)


class UpstreamFixed(UserWarning):
    """A corpus case whose bug a newer release fixed: reported in the run's warnings summary, not a failure."""


def fixed_here(folder: Path) -> bool:
    """Whether a case whose bug no longer shows was recorded on another stack (an upstream fix, reported by the corpus
    test), rather than on this one (where convsmith broke)."""
    from test_corpus import stack_differences

    return bool(stack_differences(read_case(folder).versions))


# ---- bad input: one line, exit 2, never a traceback -------------------------------------------------------

def _broken(tmp_path: Path, kind: str) -> Path:
    folder = tmp_path / kind
    shutil.copytree(WITH_MODEL, folder)
    if kind == "missing-file":
        (folder / "test_data_set_0" / "input_0.pb").unlink()
    elif kind == "malformed-json":
        (folder / "case.json").write_text("{\"schema_version\": 1,")
    elif kind == "unknown-schema":
        data = json.loads((folder / "case.json").read_text())
        data["schema_version"] = 99
        (folder / "case.json").write_text(json.dumps(data))
    elif kind == "truncated-onnx":
        (folder / "model.onnx").write_bytes((folder / "model.onnx").read_bytes()[:40])
    elif kind == "no-case-json":
        (folder / "case.json").unlink()
    return folder


@pytest.mark.parametrize("kind", ["missing-file", "malformed-json", "unknown-schema", "truncated-onnx",
                                  "no-case-json"])
@pytest.mark.parametrize("command", ["repro", "reduce", "promote"])
def test_bad_case_folder_gives_one_line(tmp_path: Path, capsys, command: str, kind: str) -> None:
    folder = _broken(tmp_path, kind)
    extra = ["--corpus", str(tmp_path / "corpus")] if command == "promote" else []
    status = cli.main([command, str(folder), *extra])
    err = capsys.readouterr().err
    assert status == 2
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and str(folder) in err
    assert not (tmp_path / "corpus").exists()


# ---- replay outcomes and exit statuses -----------------------------------------------------------------

def _fake_verdict(symptom: Symptom, signature: str) -> Verdict:
    return Verdict(symptom, Stage.NODE_CONVERSION if symptom is not Symptom.PASS else Stage.NONE, "x",
                   signature=signature)


@pytest.mark.parametrize("outcome,status,word", [("same", 1, "reproduces"), ("pass", 0, "fixed (now pass)"),
                                                 ("other", 4, "fails differently (now crash-other)")])
def test_repro_exit_status_follows_the_outcome(monkeypatch, capsys, outcome: str, status: int, word: str) -> None:
    import fuzzer.cases.replay as replay

    case = read_case(CASES[0])
    verdicts = {"same": case.verdict, "pass": _fake_verdict(Symptom.PASS, ""),
                "other": _fake_verdict(Symptom.CRASH, "crash-other")}
    monkeypatch.setattr(replay, "replay_verdict", lambda c, o=None, r=None: verdicts[outcome])
    assert cli.main(["repro", str(CASES[0])]) == status
    assert capsys.readouterr().out.strip() == f"{case.id}: {word}"


def test_a_case_of_an_onnx_to_onnx_converter_keeps_the_model_it_received() -> None:
    """A crash in onnxslim (planted) keeps the exporter's model as upstream.onnx (its maintainers need no torch)."""
    import onnx

    slim = CrashingSlim()
    made = planted_case(slim)
    assert made.verdict.symptom is Symptom.CRASH and made.model is None  # it crashed: no model after it
    assert made.upstream_model is not None
    assert [n.op_type for n in onnx.load_from_string(made.upstream_model).graph.node] == ["Sin"]
    assert "import torch" not in render_repro(made, slim)


def planted_case(converter: Converter) -> CaseData:
    """A one-sin graph checked under a converter planted with a fault (replayed as `repro` replays), as a case."""
    from fuzzer.cases.case import case_from_result
    from fuzzer.cases.replay import REPLAY_CHECK
    from fuzzer.check.pipeline import check_prepared
    from fuzzer.check.source import prepare

    graph = one_op("sin")
    result = check_prepared(prepare(graph, 3, {}, 1.0), converter, None, REPLAY_CHECK)
    assert result.verdict.is_bug, result.verdict
    return case_from_result(result, graph, 3, converter.name, {})


@pytest.mark.slow
@pytest.mark.parametrize("folder", KNOWN_BUGS, ids=[c.name[:60] for c in KNOWN_BUGS])
def test_every_corpus_report_is_short_and_its_snippet_shows_the_bug(folder: Path, tmp_path: Path) -> None:
    """report.md fits in 80 lines; its snippet, run alone in a copy of the case folder, ends in the bug's own
    exception (or numpy's assertion, for a wrong model)."""
    from fuzzer.cases.report import render_report
    from fuzzer.cases.snippet import render_snippet

    case = read_case(folder)
    assert len(render_report(case).splitlines()) <= 80
    snippet = render_snippet(case)
    assert snippet is not None and len(snippet.splitlines()) <= 30
    work = tmp_path / "case"
    shutil.copytree(folder, work)
    (work / "snippet.py").write_text(snippet)
    done = subprocess.run([sys.executable, "-I", "snippet.py"], cwd=work, capture_output=True, text=True,
                          timeout=120, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    if done.returncode == 0 and fixed_here(folder):
        pytest.skip(f"{case.id}: its bug no longer shows on the installed stack (the corpus test reports it fixed)")
    expected = ("AssertionError" if case.verdict.symptom.is_divergence
                else case.verdict.message.split(":", 1)[0].rsplit(".", 1)[-1])
    assert done.returncode != 0 and expected in done.stderr, done.stderr[-1500:]


def test_a_report_says_how_its_operator_was_located() -> None:
    """An operator found wrong alone is reported so; one named by the bisection is the first whose output is wrong."""
    import dataclasses

    from fuzzer.cases.report import summary

    case = read_case(next(c for c in KNOWN_BUGS if c.name.startswith("wrong_values")))
    op, dtype = case.verdict.diverging_op, case.verdict.diverging_dtype
    assert op and dtype
    for label, sentence in (("diverges-alone:2", f" `{op}` ({dtype}) gives a wrong output converted alone, on the "
                             "values it reads in this model."),
                            ("first-diverging-prefix:2", f" The first operator whose output is wrong is `{op}` "
                             f"({dtype}).")):
        verdict = dataclasses.replace(case.verdict, labels=(label,))
        assert sentence in summary(dataclasses.replace(case, verdict=verdict))


@pytest.mark.slow
def test_the_snippet_of_a_tool_failing_at_validation_runs_alone(tmp_path: Path) -> None:
    """A tool whose output fails validation needs no baseline run: its snippet defines no run() and calls none, and
    runs alone (on a model the tool keeps valid, it passes every check it makes)."""
    import dataclasses

    import onnx
    from onnx import TensorProto, helper

    from fuzzer.cases.snippet import render_snippet

    folder = next(c for c in ONNX_TOOL_CASES if "onnxslim" in c.name)
    case = read_case(folder)
    case = dataclasses.replace(case, verdict=dataclasses.replace(case.verdict, stage=Stage.VALIDATION))
    snippet = render_snippet(case)
    assert snippet is not None and "run(" not in snippet
    shutil.copytree(folder, tmp_path / "case")
    x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [3, 5]) for name in "xy")
    valid = helper.make_model(helper.make_graph([helper.make_node("Sin", ["x"], ["y"])], "sin", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(valid, tmp_path / "case" / "upstream.onnx")
    (tmp_path / "case" / "snippet.py").write_text(snippet)
    done = subprocess.run([sys.executable, "-I", "snippet.py"], cwd=tmp_path / "case", capture_output=True,
                          text=True, timeout=120, env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0 and "Error" not in done.stderr, done.stderr[-1500:]


def test_a_reduced_group_norm_without_affine_renders_what_it_computes() -> None:
    """The reducer may turn `affine` off and keep the weights (found in a campaign: scalar weights that
    F.group_norm refuses); the source ignores them, as forward does."""
    import torch

    from generators.ir import Graph

    graph = Graph.from_json({
        "schema_version": 1, "inputs": {"in2": {"shape": [1, 2], "dtype": "float32"}},
        "weights": {"w0": {"shape": [], "dtype": "float32"}, "w1": {"shape": [], "dtype": "float32"}},
        "nodes": [{"op": "group_norm", "inputs": ["in2", "w0", "w1"], "outputs": ["t1"],
                   "attrs": {"affine": False, "eps": 0.0, "num_groups": 1}}],
        "outputs": ["t1"], "ranges": {},
        "types": {"in2": {"shape": [1, 2], "dtype": "float32"}, "w0": {"shape": [], "dtype": "float32"},
                  "w1": {"shape": [], "dtype": "float32"}, "t1": {"shape": [1, 2], "dtype": "float32"}}})
    module = materialize(graph, 0)
    scope: dict = {"torch": torch, "load_tensor": None, "_register": lambda m, n, v: m.register_buffer(n, v)}
    exec(render_module(graph).replace("load_tensor('weights/", "WEIGHTS[('").replace(".pb')", "')]"),
         {**scope, "WEIGHTS": {w: getattr(module, w).detach() for w in graph.weights}}, scope)
    x = torch.tensor([[0.5, -1.5]])
    assert torch.equal(scope["Repro"]()(x)[0], module(x)[0])


PLANTED = ConverterRegistry([*CONVERTERS.values(), SinAsCosExporter(), CrashingSlim()])


def test_repro_over_several_folders_reports_a_non_case_apart_and_replays_the_rest(tmp_path: Path, capsys) -> None:
    """As `convsmith repro corpus/*/` does over a folder that holds no case.json: one line names it, the cases
    are still replayed, and the status follows what was replayed (a planted bug still shows: 1)."""
    from fuzzer.cases.folder import write_case

    cases = [planted_case(SinAsCosExporter()), planted_case(CrashingSlim())]
    first, second = (write_case(tmp_path / "cases", case) for case in cases)
    not_a_case = tmp_path / "notes"
    not_a_case.mkdir()
    (not_a_case / "README.md").write_text("an investigation, not a case\n")
    status = cli.main(["repro", "--registry", "test_repro:PLANTED", str(first), str(not_a_case), str(second)])
    out, err = capsys.readouterr()
    assert status == 1
    assert out.splitlines() == [f"{cases[0].id}: reproduces", f"{cases[1].id}: reproduces",
                                "3 folders: 2 reproduce, 0 fixed, 0 fail differently, 1 not a case"]
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"{not_a_case}: not a case: ")


@pytest.mark.parametrize("outcomes,bad,status", [((), True, 2), (("fixed",), True, 2), (("fixed",), False, 0),
                                                 (("different", "fixed"), True, 4),
                                                 (("reproduces", "different"), True, 1)])
def test_repro_status_ranks_the_filed_bug_over_another_failure_over_bad_input(outcomes, bad, status) -> None:
    from fuzzer.cases.replay import Outcome
    from fuzzer.commands.repro import exit_status

    labels = {"reproduces": Outcome.REPRODUCES, "fixed": Outcome.FIXED, "different": Outcome.DIFFERENT}
    assert exit_status({labels[o] for o in outcomes}, bad) == status


@pytest.mark.slow
def test_repro_py_exits_4_when_the_bug_is_replaced_by_another_failure(tmp_path: Path) -> None:
    """The ONNX Runtime optimizer's crash case, its upstream model changed so that the runtime fails otherwise (an
    operator it does not know): repro.py, run alone, says it fails differently and exits 4, not 1."""
    import onnx

    case = next(c for c in ONNX_TOOL_CASES if read_case(c).converter == "ort-optimizer")
    folder = tmp_path / case.name
    shutil.copytree(case, folder)
    model = onnx.load(str(folder / "upstream.onnx"))
    model.graph.node[0].op_type = "NoSuchOperator"
    onnx.save(model, str(folder / "upstream.onnx"))
    ran = subprocess.run([sys.executable, "-I", "repro.py"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 4, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "FAILS DIFFERENTLY" in ran.stdout


@pytest.mark.slow
def test_repro_py_exits_4_when_it_fails_outside_the_conversion(tmp_path: Path) -> None:
    """An input file that no longer parses fails repro.py before any conversion: it exits 4 (fails otherwise), never
    1, which an uncaught exception would give and `convsmith bisect` would read as the bug."""
    case = next(c for c in ONNX_TOOL_CASES if read_case(c).converter == "ort-optimizer")
    folder = tmp_path / case.name
    shutil.copytree(case, folder)
    (folder / "repro.py").write_text(render_repro(read_case(folder)), encoding="utf-8")  # today's harness
    (folder / "test_data_set_0" / "input_0.pb").write_bytes(b"\xff not a TensorProto")
    ran = subprocess.run([sys.executable, "-I", "repro.py"], cwd=folder, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 4, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "repro.py: failed outside the conversion this case was filed for" in ran.stderr


def test_the_docstring_names_the_libraries_the_script_imports_in_order() -> None:
    script = "import numpy as np\n\ndef run():\n    import openvino as ov\n    import torch\n"
    assert imported_libraries(script, ("torch", "onnx", "onnxruntime", "numpy", "openvino", "torch")) == \
        "torch, numpy, openvino"
