"""The machine-readable report, schema `gpudoctor.report/1` (CONTRACT.md)."""

from __future__ import annotations

import json
from typing import IO

from gpudoctor.facts.run import summary as run_summary
from gpudoctor.model import Report
from gpudoctor.version import __version__

SCHEMA = "gpudoctor.report/1"


def to_json(report: Report) -> dict:
    host = report.facts.get("host") or {}
    return {
        "schema": SCHEMA,
        "tool": {"name": "gpudoctor", "version": __version__},
        "source": {"kind": report.source.get("kind", "live"), "paths": list(report.source.get("paths", [])),
                   **({"nothing": report.source["nothing"]} if report.source.get("nothing") else {}),
                   **({"unplaced": report.source["unplaced"]} if report.source.get("unplaced") else {})},
        "host": {"hostname": host.get("hostname"), "os": host.get("os")},
        "summary": report.summary(),
        "findings": [finding.to_json() for finding in report.findings],
        "passed": list(report.passed),
        "unknown": [item.to_json() for item in report.unknown],
        "not_applicable": [item.to_json() for item in report.not_applicable],
        "probes": [probe.to_json() for probe in report.probes],
        "conflicts": list(report.conflicts),
        "evidence": dict(report.evidence),
        "seconds": round(report.seconds, 3),
        "timings": timings(report),
        **({"run": run_summary(report.facts["run"])} if isinstance(report.facts.get("run"), dict) else {}),
    }


def timings(report: Report) -> dict:
    """Figures that are the node's, not gpudoctor's: NVML initialisation (seconds without persistence mode)."""
    nvml = report.facts.get("nvml") or {}
    return {"nvml_init_seconds": nvml["init_seconds"]} if isinstance(nvml.get("init_seconds"), (int, float)) else {}


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    """The whole document (`quiet` shortens only the text formats)."""
    json.dump(to_json(report), stream, indent=2, ensure_ascii=False)
    stream.write("\n")
