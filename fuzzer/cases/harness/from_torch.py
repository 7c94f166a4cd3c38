"""main of a repro.py that runs the source model: the graph as plain PyTorch, converted as convsmith converted it,
its outputs against eager PyTorch (or, for an ONNX-to-ONNX tool, against the model the tool received)."""
import sys

import onnx
import onnxruntime as ort
import torch

from fuzzer.cases.harness.child import exit_status
from fuzzer.cases.harness.export import export_dynamo, export_script, export_upstream
from fuzzer.cases.harness.head import (
    CASE,
    CONVERTER,
    DEVICE,
    INPUT_NAMES,
    ONNX_CHECKED,
    OPTIONS,
    OUTPUT_NAMES,
    SECOND_SHAPE,
)
from fuzzer.cases.harness.judging import judge, judged, report_crash
from fuzzer.cases.harness.runtime import (
    check_and_serialize,
    declared_names,
    export,
    run_onnx,
    symbolic_inputs,
    transform,
)
from fuzzer.cases.harness.torch_tensors import load_tensor, to_numpy


def export_and_run_script(module, inputs):
    """torch-onnx-script: (its model's outputs, no baseline, its model)."""
    model = export_script(module, inputs, OPTIONS["opset"], OPTIONS["constant_folding"],
                          OPTIONS.get("script_module", False), OPTIONS.get("dynamic", False))
    data = check_and_serialize(model)
    return run_onnx(data, inputs), None, data


def export_and_run_dynamo(module, inputs):
    """torch-onnx-dynamo: (its model's outputs, no baseline, its model)."""
    model = export_dynamo(module, inputs, OPTIONS["opset"], OPTIONS["optimize"], OPTIONS.get("dynamic", False))
    data = check_and_serialize(model)
    return run_onnx(data, inputs), None, data


def export_and_run_snippet(module, inputs):
    """An exporter called as its snippet calls it: (its model's outputs, no baseline, its model)."""
    data = check_and_serialize(export(module, tuple(inputs)))
    return run_onnx(data, inputs), None, data


def no_conversion(module, inputs):
    """A converter that declares no call a script can make: repro.py cannot run here."""
    print(f"repro.py: cannot run: it has no call of {CONVERTER}", file=sys.stderr)
    raise SystemExit(3)


def optimize_in_session(module, inputs):
    """ort-optimizer: (the exported model's outputs at the level, the same with optimizations off, that model)."""
    upstream = check_and_serialize(export_upstream(module, inputs))
    if OPTIONS.get("free_dims"):
        upstream = symbolic_inputs(upstream)
    baseline = run_onnx(upstream, inputs)
    return run_onnx(upstream, inputs, OPTIONS["level"], OPTIONS.get("free_dims", False)), baseline, upstream


def transform_export(module, inputs):
    """An ONNX-to-ONNX tool: (its model's outputs, the exported model's outputs, its model). The tool runs before
    the exported model: its failure shows even where ONNX Runtime cannot run that."""
    upstream = check_and_serialize(export_upstream(module, inputs))
    data = check_and_serialize(transform(onnx.load_from_string(upstream)), ONNX_CHECKED)
    baseline = run_onnx(upstream, inputs)
    return run_onnx(data, inputs, names=declared_names(upstream)), baseline, data


def convert_and_run(module, inputs):
    """The case's conversion: the script defines it as one of the above, the one its converter names
    (Converter.repro_conversion)."""
    raise NotImplementedError(f"repro.py names no conversion of {CONVERTER}")


class Repro(torch.nn.Module):
    """The case's graph: a repro.py has it here written as plain PyTorch, one line per node."""


def main():
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False  # full float32, as convsmith ran it
    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb").to(DEVICE) for i in range(len(INPUT_NAMES))]
    saved = [load_tensor(f"test_data_set_0/output_{i}.pb") for i in range(len(OUTPUT_NAMES))]
    module = Repro().eval().to(DEVICE)
    with torch.no_grad():
        eager = [to_numpy(x) for x in module(*inputs)]
    print(f"{CASE}: {CONVERTER} {OPTIONS}")
    print(f"torch {torch.__version__}, onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    if judge(eager, [to_numpy(x) for x in saved], "saved expected") is None:
        print("eager PyTorch matches the saved expected outputs")
    try:
        outputs, baseline, data = convert_and_run(module, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "a converted model that runs and matches eager PyTorch")
    if baseline is not None:
        print("target vs the unconverted ONNX model (baseline):")
        kind = judge(outputs, baseline, "baseline")
    else:
        print("target vs eager PyTorch:")
        kind = judge(outputs, eager, "eager")
    if SECOND_SHAPE and kind is None:  # the dynamic model, traced at the shapes above, at its second shape
        inputs = [load_tensor(f"test_data_set_1/input_{i}.pb").to(DEVICE) for i in range(len(INPUT_NAMES))]
        with torch.no_grad():
            eager = [to_numpy(x) for x in module(*inputs)]
        try:
            outputs = run_onnx(data, inputs)
        except Exception as exc:
            return report_crash(exc, "the dynamic model runs at the second shape too and matches eager PyTorch")
        print(f"at the second shape {[tuple(x.shape) for x in inputs]}, target vs eager PyTorch:")
        kind = judge(outputs, eager, "eager")
    return judged(kind)


if __name__ == "__main__":
    sys.exit(exit_status(main))
