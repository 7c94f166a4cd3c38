"""The harness of repro.py (fuzzer/cases/harness/) is real Python that imports nothing of convsmith, and the
assembly copies into each script what its converter needs, every name it reads defined."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from pathlib import Path

import pytest

from fuzzer.cases.assembly import HARNESS, HarnessError, assemble, parse_module
from fuzzer.cases.folder import read_case
from fuzzer.cases.repro import TORCH_SCRIPT, UPSTREAM_SCRIPT, case_values, render_repro
from fuzzer.converters import CONVERTERS
from fuzzer.converters.upstream import upstream_default_opset, upstream_names
from oracles.verdict import Symptom

CORPUS = Path(__file__).resolve().parents[1] / "corpus"
CASES = sorted(p.parent for p in CORPUS.glob("*/case.json"))
MODULES = sorted(p.stem for p in HARNESS.glob("*.py") if p.stem != "__init__")
# What a script may import: the stack every script uses, and the libraries of the converters it may call.
SCRIPT_LIBRARIES = {"numpy", "onnx", "onnxruntime", "torch"} | {lib.split(".")[0] for converter in CONVERTERS.values()
                                                              for lib in converter.libraries}


@pytest.mark.parametrize("name", MODULES)
def test_each_harness_module_imports_and_imports_nothing_of_convsmith_but_the_harness(name: str) -> None:
    module = importlib.import_module(f"fuzzer.cases.harness.{name}")
    tree = ast.parse(Path(module.__file__ or "").read_text())
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        for imported in names:
            top = imported.split(".")[0]
            assert imported.startswith("fuzzer.cases.harness.") or top in sys.stdlib_module_names | \
                SCRIPT_LIBRARIES, f"{name}.py imports {imported}"


def _script_imports(text: str) -> set[str]:
    tree = ast.parse(text)
    found = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    return found | {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}


def _variants() -> list[tuple[str, object]]:
    """Each corpus case as it is, and the first one of each kind again under every converter and upstream."""
    cases = [read_case(c) for c in CASES]
    torch_case = next(c for c in cases if c.upstream_model is None)
    tool_case = next(c for c in cases if c.upstream_model is not None)
    made = [(c.id, c) for c in cases]
    for name, converter in CONVERTERS.items():
        options = dataclasses.asdict(converter.options({}))
        for upstream in upstream_names() if "upstream" in options else ("",):
            opset = upstream_default_opset(upstream) if upstream else options.get("opset")
            drawn = {**options, "upstream": upstream, "opset": opset} if upstream else options
            case = dataclasses.replace(torch_case, converter=name, converter_options=drawn)
            made.append((f"{name}-{upstream}", case))
        if "upstream" in options:
            made.append((f"{name}-upstream.onnx", dataclasses.replace(tool_case, converter=name,
                                                                      converter_options=options)))
    return made


@pytest.mark.parametrize("label,case", _variants(), ids=[label[:60] for label, _ in _variants()])
def test_every_script_compiles_and_imports_only_the_libraries_it_needs(label: str, case) -> None:
    text = render_repro(case)
    compile(text, "repro.py", "exec")
    assert _script_imports(text) <= sys.stdlib_module_names | SCRIPT_LIBRARIES, label
    body = ast.parse(text).body
    defined = {n.name for n in body if isinstance(n, ast.FunctionDef)}
    assert {"main", "convert_and_run", "exit_status"} <= defined and "conversion" not in defined
    # Everything is defined before the entry block runs main (a converter's own harness module comes after main's).
    assert isinstance(body[-1], ast.If) and not any(isinstance(n, ast.If) for n in body[:-1]), label
    if case.converter == "torch-onnx-script":
        assert "export_dynamo" not in defined and "transform" not in defined
    if case.converter == "torch-onnx-dynamo":
        assert "export_script" not in defined and "transform" not in defined
    if case.upstream_model is None and case.converter_options.get("upstream") == "onnx-native":
        assert not {"export_script", "export_dynamo"} & defined


def test_a_script_holds_the_symptom_groups_of_the_verdict_taxonomy() -> None:
    values = case_values(read_case(CASES[0]))
    assert values["DIVERGENCES"] == repr(tuple(s.json_name for s in Symptom.divergences()))
    assert values["LOST"] == repr(tuple(s.json_name for s in Symptom.lost_worker()))
    assert set(values) == TORCH_SCRIPT[0].placeholders == UPSTREAM_SCRIPT[0].placeholders


def test_a_name_the_script_would_not_define_is_refused() -> None:
    """A harness module's own imports are not copied: a function reading one of them would fail in repro.py."""
    source = (HARNESS / "export.py").read_text()
    moved = source.replace("    import io\n\n", "").replace("import os\n", "import io\nimport os\n", 1)
    assert moved != source
    modules = (*TORCH_SCRIPT[:-2], parse_module(moved), TORCH_SCRIPT[-1])
    case = read_case(CASES[0])
    args = case_values(case), {"title": "t", "libs": "l"}, {"convert_and_run": "export_and_run_script",
                                                            "export_upstream": "upstream_by_script"}
    with pytest.raises(HarnessError, match="'io'"):
        assemble(modules, *args, {"transform": "def transform(model):\n    return model\n",
                                  "Repro": "class Repro:\n    pass\n"})


def test_a_placeholder_without_a_value_is_refused() -> None:
    values = case_values(read_case(CASES[0]))
    del values["MEMORY_MB"]
    with pytest.raises(HarnessError, match="placeholders"):
        assemble(TORCH_SCRIPT, values, {}, {}, {})
