"""Renderers turn a Report into output; they only read it."""

from __future__ import annotations

from typing import IO

FORMATS = ("rich", "plain", "json", "markdown", "prometheus")


def render_report(report, fmt: str, stream: IO, quiet: bool = False) -> None:
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
