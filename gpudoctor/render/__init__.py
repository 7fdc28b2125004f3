"""Renderers turn a Report into output; they only read it."""

from __future__ import annotations

from typing import IO

FORMATS = ("rich", "plain", "json", "markdown", "prometheus")


def render_report(report, fmt: str, stream: IO, quiet: bool = False) -> None:
    """Render in one of FORMATS, secrets redacted first (gpudoctor.redact) so that no format can show one, and
    control characters escaped in the human formats (gpudoctor.render.printable)."""
    from gpudoctor.redact import redact_data
    from gpudoctor.render.printable import printable_data

    report = redact_data(report)
    if fmt in ("rich", "plain", "markdown"):
        report = printable_data(report)
    if fmt == "json":
        from gpudoctor.render import json_report

        json_report.render(report, stream)
    elif fmt == "markdown":
        from gpudoctor.render import markdown

        markdown.render(report, stream)
    elif fmt == "prometheus":
        from gpudoctor.render import prometheus

        prometheus.render(report, stream)
    else:
        from gpudoctor.render import text

        text.render(report, stream, color=fmt == "rich", quiet=quiet)
