"""Renderers turn a Report into output; they only read it.

FORMATS is the one list of output formats (`--format` of `check` and `lint`, the fleet report's, the library's
`format_report`, docs/output.md). A new format is a module of gpudoctor.render with `render(report, stream, quiet)`
and one `Output` record here; tests/test_registries.py holds the lists elsewhere against this one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import IO, Callable, Dict, Tuple


@dataclass(frozen=True)
class Output:
    """`name`: what `--format` takes; `what`: the format in words (docs/output.md); `write`: "module.function" of
    gpudoctor.render, called as `function(report, stream, quiet)` and imported on use; `human`: text a person reads
    (control characters escaped, gpudoctor.render.printable); `fleet`: the fleet report (`gpudoctor fleet`, `check
    --fleet`) is written in it too."""

    name: str
    what: str
    write: str
    human: bool = False
    fleet: bool = False

    def writer(self) -> Callable:
        module, function = self.write.rsplit(".", 1)
        return getattr(importlib.import_module(f"gpudoctor.render.{module}"), function)


FORMATS: Tuple[Output, ...] = (
    Output("rich", "text with coloured marks, for a terminal (the default there)", "text.render_rich", human=True,
           fleet=True),
    Output("plain", "the same text without colour (the default when piped or written to a file)", "text.render",
           human=True, fleet=True),
    Output("json", "the `gpudoctor.report/1` document a scheduler can act on", "json_report.render", fleet=True),
    Output("markdown", "a redacted report to paste into a bug report instead of `collect_env`", "markdown.render",
           human=True),
    Output("prometheus", "gauges for node_exporter's textfile collector", "prometheus.render"),
    Output("sarif", "SARIF 2.1.0 for GitHub code scanning and other review tools: each finding on its file and line",
           "sarif.render"),
    Output("junit", "JUnit XML for CI test reports: a failing case per finding, a skipped one per rule not judged",
           "junit.render"),
    Output("drain-reason", "one line for a scheduler's drain reason: the worst finding at or above --fail-on, then "
           "the other rules that fired (nothing when none did)", "drain_reason.render"),
)
BY_NAME: Dict[str, Output] = {fmt.name: fmt for fmt in FORMATS}
NAMES = tuple(BY_NAME)
FLEET_NAMES = tuple(fmt.name for fmt in FORMATS if fmt.fleet)


def render_report(report, fmt: str, stream: IO, quiet: bool = False) -> None:
    """Render in one of FORMATS, secrets redacted first (gpudoctor.redact) so that no format can show one, and
    control characters escaped in the human formats (gpudoctor.render.printable)."""
    from gpudoctor.redact import redact_data
    from gpudoctor.render.printable import printable_data

    output = BY_NAME[fmt]
    report = redact_data(report)
    if output.human:
        report = printable_data(report)
    output.writer()(report, stream, quiet)


def markdown_table() -> str:
    """The table of formats in docs/output.md."""
    rows = ["| `--format` | what it writes | also for the fleet report |", "| --- | --- | --- |"]
    rows += [f"| `{fmt.name}` | {fmt.what} | {'yes' if fmt.fleet else 'no'} |" for fmt in FORMATS]
    return "\n".join(rows) + "\n"
