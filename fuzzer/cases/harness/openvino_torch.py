"""main of a repro.py that converts the source module with OpenVINO's PyTorch frontend: the graph as plain PyTorch,
converted and run on the CPU plugin as convsmith ran it, against eager PyTorch. Needs torch, openvino and numpy."""
import sys

import torch

from fuzzer.cases.harness.child import exit_status
from fuzzer.cases.harness.head import CASE, CONVERTER, INPUT_NAMES, OPTIONS, OUTPUT_NAMES
from fuzzer.cases.harness.judging import judge, judged, report_crash
from fuzzer.cases.harness.openvino_run import openvino_version, plugin_tolerances
from fuzzer.cases.harness.openvino_tensors import load_tensor, read_array, to_numpy


def convert_and_run(module, inputs):
    """The case's conversion: the script defines it as its converter names it (Converter.repro_conversion)."""
    raise NotImplementedError(f"repro.py names no conversion of {CONVERTER}")


class Repro(torch.nn.Module):
    """The case's graph: a repro.py has it here written as plain PyTorch, one line per node."""


def main():
    torch.manual_seed(0)
    plugin_tolerances()
    inputs = [load_tensor(f"test_data_set_0/input_{i}.pb") for i in range(len(INPUT_NAMES))]
    saved = [read_array(f"test_data_set_0/output_{i}.pb") for i in range(len(OUTPUT_NAMES))]
    module = Repro().eval()
    with torch.no_grad():
        eager = [to_numpy(x) for x in module(*inputs)]
    print(f"{CASE}: {CONVERTER} {OPTIONS}")
    print(f"torch {torch.__version__}, openvino {openvino_version()}")
    if judge(eager, saved, "saved expected") is None:
        print("eager PyTorch matches the saved expected outputs")
    try:
        outputs, _, _ = convert_and_run(module, inputs)
    except ImportError:
        raise  # cannot run here: not the bug
    except Exception as exc:
        return report_crash(exc, "a converted model that runs and matches eager PyTorch")
    print("target vs eager PyTorch:")
    return judged(judge(outputs, eager, "eager"))


if __name__ == "__main__":
    sys.exit(exit_status(main))
