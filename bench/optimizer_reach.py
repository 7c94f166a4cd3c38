"""Where a campaign looked, read from its folder: root causes per converter (the exporters against the ONNX-to-ONNX
tools), each tool's share of rewrites fired, and per converter the share of its tests that ended in a root cause
found earlier in the campaign (a known failure spending budget).

    python bench/optimizer_reach.py DIR [--corpus corpus]

DIR is a finished campaign (e.g. `convsmith fuzz --time 60m --workers 2 --avoid-unsupported --out DIR`).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzzer.campaign.db import open_campaign  # noqa: E402
from fuzzer.campaign.policy.culprit_cut import CULPRIT_CUT  # noqa: E402
from fuzzer.campaign.rewrites import coverage  # noqa: E402
from fuzzer.converters import CONVERTERS  # noqa: E402
from fuzzer.converters.role import Role  # noqa: E402
from fuzzer.triage.view import triage  # noqa: E402

# The ONNX-to-ONNX tools the "22 root causes" counted, before ONNX Runtime's transformers optimizer and
# symbolic shape inference joined them: a like-for-like total beside the new one.
FIRST_FIVE_TOOLS = ("ort-optimizer", "onnxsim", "onnxslim", "onnxoptimizer", "onnx-version-converter")


def known_failure_shares(db, groups) -> dict[str, tuple[int, int, int]]:  # noqa: ANN001
    """Per converter: (bug tests whose root cause the campaign had found before, tests that hit one first and were
    run again with its culprit cut out, tests)."""
    key = {f.signature: g.key for g in groups for f in g.findings}
    seen: set[str] = set()
    known: collections.Counter[str] = collections.Counter()
    cut: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    for converter, signature, is_bug, labels in db.conn.execute(
            "SELECT converter, signature, is_bug, labels FROM tests ORDER BY finished"):
        total[converter] += 1
        cause = key.get(signature, signature)
        if is_bug and cause in seen:
            known[converter] += 1
        if is_bug:
            seen.add(cause)
        if any(label.startswith(CULPRIT_CUT) for label in json.loads(labels)):  # named or guessed
            cut[converter] += 1
    return {c: (known[c], cut[c], total[c]) for c in total}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", type=Path)
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpus")
    args = parser.parse_args()
    db = open_campaign(args.dir)
    try:
        result = triage(args.dir, db, args.corpus)
        rows = coverage(db, CONVERTERS)
        shares = known_failure_shares(db, result.groups)
    finally:
        db.close()
    by_owner = collections.Counter(g.cause.converter for g in result.groups)
    tools = {owner: n for owner, n in by_owner.items()
             if owner in CONVERTERS and CONVERTERS[owner].role is Role.ONNX_TOOL}
    print(f"{result.headline.tests} tests, {len(result.groups)} root causes")
    print("root causes by owner: " + ", ".join(f"{k} {v}" for k, v in by_owner.most_common()))
    first_five = sum(n for owner, n in tools.items() if owner in FIRST_FIVE_TOOLS)
    print(f"ONNX-to-ONNX tools together: {sum(tools.values())} ({first_five} of them in the five tools issue 29 "
          f"counted: {', '.join(FIRST_FIVE_TOOLS)})")
    for row in rows:
        print(f"{row.converter}: {row.summary()}; never fired: {', '.join(row.never_fired) or 'none'}")
        if row.out_of_reach:
            print(f"  cannot fire in this campaign: {', '.join(row.out_of_reach)}")
    print("tests that ended in a root cause the campaign had already found, per converter (and those that hit one "
          "first, then ran with its culprit cut out):")
    for converter, (known, cut, total) in sorted(shares.items()):
        print(f"  {converter:<24} {known:>6} of {total:>6} ({known / max(total, 1):.1%}); culprit cut {cut:>5} "
              f"({cut / max(total, 1):.1%})")
    print("tests by exporter model: " + ", ".join(f"{k} {v}" for k, v in sorted(result.exporter_split.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
