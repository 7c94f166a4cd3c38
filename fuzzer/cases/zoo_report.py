"""The report.md of a campaign's finding in a zoo model (its evidence folder, fuzzer/campaign/zoo_unit.py): a title
naming the architecture, whose bug it is, and the command that checks it again with the same weights, inputs and
converter settings."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from fuzzer.cases.diagnosis import Blame
from fuzzer.cases.report import display_name
from oracles.rootcause import quoted_error
from oracles.verdict import Verdict


def zoo_title(entry: str, converter: str, verdict: Verdict) -> str:
    """'torch.onnx.export (dynamo): crash at node conversion on zoo model `t5`: ValueError: ...'."""
    error = quoted_error(verdict.message) if verdict.message and not verdict.symptom.is_divergence else ""
    what = f"{verdict.symptom.json_name.replace('_', ' ')} at {verdict.stage.value.replace('_', ' ')}"
    return f"{display_name(converter)}: {what} on zoo model `{entry}`" + (f": {error}" if error else "")


def check_command(entry: str, seed: int, converter: str, options: Mapping[str, Any]) -> str:
    """The `convsmith check` line that builds the same model and converts it with the same settings."""
    parts = ["convsmith", "check", "--zoo", entry, "--seed", str(seed), "--converters", converter]
    for key, value in sorted(options.items()):
        parts += ["--option", f"{key}={json.dumps(value)}"]
    return shlex.join(parts)


def zoo_report(entry: str, seed: int, converter: str, options: Mapping[str, Any], verdict: Verdict,
               blame: Blame) -> str:
    """The finding's report.md."""
    settled = "" if blame.settled else " (not settled: what is known is below)"
    lines = [f"# {zoo_title(entry, converter, verdict)}", "", verdict.message.strip().splitlines()[0]
             if verdict.message.strip() else "", "", "## Whose bug", "", f"File with {blame.file_with()}{settled}.",
             "", *(f"- {line}" for line in blame.evidence), "", "## Check it again", "",
             "The architecture rebuilt with the seed's weights and inputs and converted with the same settings (an "
             "ONNX tool's upstream export is made again by `check`, and may take another path than the campaign's "
             "where the export differs in detail):", "",
             "```sh", check_command(entry, seed, converter, options), "```", "",
             "Beside this report: `zoo.json` (the record), `model.onnx` (the converted model, where there is one) and "
             "`test_data_set_0/` (the inputs and the source model's outputs, in ONNX's test-case layout).", ""]
    return "\n".join(lines)
