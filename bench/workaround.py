"""Workaround benchmark: over the reduced cases of a campaign folder (`*-reduced` case folders, as `convsmith fuzz` or
`convsmith reduce --inside` keeps them), count the workarounds found and the cases none of the settings tried helps,
re-run each found one on the case's own inputs (it must pass), and time the search again per case (the seconds it
adds to a reduced case's diagnosis).

    python bench/workaround.py /tmp/wa
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a campaign's output folder")
    args = parser.parse_args()
    if not args.folder.is_dir():
        parser.error(f"{args.folder} is not a folder")
    from fuzzer.cases.folder import read_case
    from fuzzer.cases.replay import case_expected
    from fuzzer.check.pipeline import check_prepared
    from fuzzer.converters import CONVERTERS
    from fuzzer.diagnosis.workaround import find_workaround, runner

    counts = {"found": 0, "none helps": 0, "not searched": 0, "re-run passes": 0}
    seconds = []
    for folder in sorted(p for p in args.folder.rglob("*-reduced") if (p / "case.json").is_file()):
        case = read_case(folder)
        found = case.workaround
        kind = "not searched" if found is None else "found" if found.found else "none helps"
        counts[kind] += 1
        rerun = ""
        if found is not None and found.found:
            converter = runner(found.converter, found.level, CONVERTERS[found.converter])
            assert converter is not None
            symptom = check_prepared(case_expected(case), converter, found.options).verdict.symptom
            counts["re-run passes"] += symptom.json_name == "pass"
            rerun = f", re-run: {symptom.json_name}"
        start = time.perf_counter()
        again = find_workaround(case)
        seconds.append(time.perf_counter() - start)
        same = "same" if again == found else "differs"
        print(f"{folder.name}: {kind}{rerun}; searched again in {seconds[-1]:.2f} s ({same})")
    if seconds:
        print(f"{len(seconds)} reduced cases: " + ", ".join(f"{k} {v}" for k, v in counts.items())
              + f"; search seconds a case: median {statistics.median(seconds):.2f}, mean "
              f"{statistics.mean(seconds):.2f}, max {max(seconds):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
