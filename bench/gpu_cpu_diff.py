"""Every case of a `--device cuda` campaign replayed on the CPU: which show on CUDA only (ONNX Runtime's CUDA kernels,
or the CUDA source, are a class of their own and are filed as such), which on both, which differently.

    python bench/gpu_cpu_diff.py CAMPAIGN_DIR

One line per case folder (its reduced case where there is one), then the tally. On a campaign run on the CPU every
case shows the same on both, which is how tests/test_bench.py runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.spec import case_folders  # noqa: E402
from fuzzer.cases.case_json import CaseError, reduced_folder  # noqa: E402
from fuzzer.cases.folder import read_case  # noqa: E402
from fuzzer.cases.replay import replay_verdict  # noqa: E402

CUDA_ONLY, BOTH, DIFFERENT = "cuda only", "both", "differently"


def compare(folder: Path) -> tuple[str, str, str]:
    """(the case's signature where it was found, its signature replayed on the CPU ('' when it passes), outcome)."""
    case = read_case(folder)
    on_cpu = replay_verdict(dataclasses.replace(case, device="cpu"))
    if not on_cpu.is_bug:
        return case.signature, "", CUDA_ONLY
    return case.signature, on_cpu.signature, BOTH if on_cpu.signature == case.signature else DIFFERENT


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("campaign", type=Path)
    args = parser.parse_args()
    if not (args.campaign / "campaign.db").is_file():
        print(f"{args.campaign}: not a campaign folder (no campaign.db)", file=sys.stderr)
        return 2
    tally: Counter[str] = Counter()
    for folder in case_folders(args.campaign):
        chosen = reduced_folder(folder) or folder
        try:
            found, cpu, outcome = compare(chosen)
        except CaseError as exc:
            print(f"{chosen.name}: unreadable ({exc})")
            continue
        tally[outcome] += 1
        shown = {CUDA_ONLY: "passes on the CPU: a CUDA-only bug (ONNX Runtime's CUDA kernels or the CUDA source)",
                 BOTH: "the same on the CPU", DIFFERENT: f"on the CPU: {cpu}"}[outcome]
        print(f"{chosen.name}: {shown}")
    print(f"{sum(tally.values())} cases: {tally[CUDA_ONLY]} CUDA only, {tally[BOTH]} the same on the CPU, "
          f"{tally[DIFFERENT]} different on the CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
