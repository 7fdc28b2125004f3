"""`--format drain-reason`: the one line a scheduler records as a node's drain reason (`scontrol update
state=drain reason=…`, a Kubernetes taint's annotation): the first finding of the highest severity, its message cut
at a word near REASON_LENGTH characters, then the other rules that fired; nothing when no rule fired. The command
gives it only the findings at or above `--fail-on`, those that drain."""

from __future__ import annotations

from typing import IO

from gpudoctor.model import Report
from gpudoctor.render.printable import printable

REASON_LENGTH = 110  # characters of the message: `sinfo -R` and `scontrol show node` show a reason whole up to here


def reason(report: Report) -> str:
    if not report.findings:
        return ""
    first = max(report.findings, key=lambda finding: finding.severity)  # the first of the highest severity
    message = " ".join(printable(first.message).split())  # one line, whatever a message from a file holds
    if len(message) > REASON_LENGTH:
        message = message[:REASON_LENGTH].rsplit(" ", 1)[0] + "..."
    others = list(dict.fromkeys(f.rule for f in report.findings if f is not first and f.rule != first.rule))
    return f"gpudoctor {first.rule}: {message}" + (f" [also {' '.join(others)}]" if others else "")


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    text = reason(report)
    if text:
        stream.write(text + "\n")
