"""main of a repro.py that starts from upstream.onnx and needs no torch: the ONNX-to-ONNX tool's model against the
model it received, both in ONNX Runtime."""
import os
import sys

import onnx
import onnxruntime as ort

from fuzzer.cases.harness.child import exit_status
from fuzzer.cases.harness.head import CASE, CONVERTER, HERE, INPUT_NAMES, ONNX_CHECKED, OPTIONS
from fuzzer.cases.harness.judging import judge, judged, report_crash
from fuzzer.cases.harness.numpy_tensors import load_tensor
from fuzzer.cases.harness.runtime import check_and_serialize, declared_names, run_onnx, symbolic_inputs, transform


def optimize_upstream_in_session(upstream, inputs):
    """ort-optimizer: (upstream.onnx's outputs at the level, the same with optimizations off)."""
    if OPTIONS.get("free_dims"):
        upstream = symbolic_inputs(upstream)  # upstream.onnx may be the exported model, its dims not yet named
    baseline = run_onnx(upstream, inputs)
    return run_onnx(upstream, inputs, OPTIONS["level"], OPTIONS.get("free_dims", False)), baseline


def transform_upstream(upstream, inputs):
    """An ONNX-to-ONNX tool: (its model's outputs, upstream.onnx's outputs). The tool runs first: its failure shows
    even where ONNX Runtime cannot run upstream.onnx."""
    data = check_and_serialize(transform(onnx.load_from_string(upstream)), ONNX_CHECKED)
    baseline = run_onnx(upstream, inputs)
    return run_onnx(data, inputs, names=declared_names(upstream)), baseline


def convert_and_run(upstream, inputs):
    """The case's conversion: the script defines it as one of the above, the one its converter names
    (Converter.repro_upstream_conversion)."""
    raise NotImplementedError(f"repro.py names no conversion of {CONVERTER}")


def main():
    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb") for i in range(len(INPUT_NAMES))]
    with open(os.path.join(HERE, "upstream.onnx"), "rb") as handle:
        upstream = handle.read()
    print(f"{CASE}: {CONVERTER} {OPTIONS}, starting from upstream.onnx")
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}")
    try:
        outputs, baseline = convert_and_run(upstream, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "the converted model runs and matches upstream.onnx run with optimizations off")
    print("target vs upstream.onnx run with optimizations off (baseline):")
    return judged(judge(outputs, baseline, "baseline"))


if __name__ == "__main__":
    sys.exit(exit_status(main))
