"""main of a repro.py that reads upstream.onnx with OpenVINO's ONNX frontend: the model read and run on the CPU
plugin as convsmith ran it, against the expected outputs saved with the case (eager PyTorch's, which upstream.onnx
gave in ONNX Runtime too, or the case would not be OpenVINO's). Needs openvino and numpy alone."""
import os
import sys

from fuzzer.cases.harness.child import exit_status
from fuzzer.cases.harness.head import CASE, CONVERTER, HERE, INPUT_NAMES, OPTIONS, OUTPUT_NAMES
from fuzzer.cases.harness.judging import judge, judged, report_crash
from fuzzer.cases.harness.openvino_run import openvino_version, plugin_tolerances
from fuzzer.cases.harness.openvino_tensors import read_array


def convert_and_run(upstream, inputs):
    """The case's conversion: the script defines it as its converter names it
    (Converter.repro_upstream_conversion)."""
    raise NotImplementedError(f"repro.py names no conversion of {CONVERTER}")


def main():
    plugin_tolerances()
    inputs = [read_array(f"test_data_set_0/input_{i}.pb") for i in range(len(INPUT_NAMES))]
    saved = [read_array(f"test_data_set_0/output_{i}.pb") for i in range(len(OUTPUT_NAMES))]
    with open(os.path.join(HERE, "upstream.onnx"), "rb") as handle:
        upstream = handle.read()
    print(f"{CASE}: {CONVERTER} {OPTIONS}, starting from upstream.onnx")
    print(f"openvino {openvino_version()}")
    try:
        outputs, _ = convert_and_run(upstream, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "the converted model runs and matches the expected outputs")
    print("target vs the saved expected outputs:")
    return judged(judge(outputs, saved, "expected"))


if __name__ == "__main__":
    sys.exit(exit_status(main))
