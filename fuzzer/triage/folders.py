"""One folder per root cause in the campaign folder: `root-causes/<key>/root_cause.json` (the key's parts, the
study's cause class, hits, first seen, every signature, dtype, converter and option it was seen with) and
`representative`, a link to its smallest (reduced) case. Written anew each time, so it follows the reductions.
Where `convsmith report` computed the root cause's impact on the zoo, root_cause.json holds it and the
representative case's report.md gets its section (fuzzer/triage/impact_section.py)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from fuzzer.support.files import STAGING_PREFIX, atomic_publish_dir, make_shared, moved_aside
from fuzzer.triage.impact_section import add_impact_section
from fuzzer.triage.view import Triage

FOLDER = "root-causes"
SUMMARY = "root_cause.json"
LINK = "representative"


def write_root_causes(out_dir: Path, triage: Triage) -> Path:
    """Replace `out_dir/root-causes` with one folder per root cause; returns the folder."""
    final = out_dir / FOLDER
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=f"{STAGING_PREFIX}{FOLDER}-"))
    try:
        make_shared(staging)
        for group in triage.groups:
            folder = staging / group.key
            folder.mkdir()
            summary = {**group.to_json(), **triage.impact_json(group.key)}
            (folder / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
            case_dir = group.representative.case_dir
            if case_dir:
                os.symlink(Path("..", "..", case_dir), folder / LINK)
                if group.key in triage.impacts:
                    add_impact_section(out_dir / case_dir, triage.impacts[group.key], group.representative.nodes)
        old = moved_aside(final, staging)
        if final.exists():
            final.rename(old)
        atomic_publish_dir(staging, final)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final
