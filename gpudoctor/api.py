"""gpudoctor as a library: gather facts, evaluate the rules, format the report — no command line involved.

    import gpudoctor
    snapshot = gpudoctor.collect(gpudoctor.Request(files=["job.sbatch"]))
    report = gpudoctor.evaluate(snapshot)
    print(gpudoctor.format_report(report, "plain"))
"""

from __future__ import annotations

import io
from typing import Optional, Sequence

from gpudoctor.gather import Request, gather
from gpudoctor.model import Report
from gpudoctor.snapshot import Snapshot

__all__ = ["Request", "collect", "evaluate", "format_report"]


def collect(request: Request) -> Snapshot:
    """The facts the request describes (this machine, a recorded snapshot, pasted reports, job files …);
    raises gpudoctor.errors.InputError for input it cannot use."""
    return gather(request)


def evaluate(snapshot: Snapshot, rules: Optional[Sequence] = None, select: Sequence[str] = (),
             ignore: Sequence[str] = ()) -> Report:
    """The report of the rules on the snapshot: `rules` (default: the catalog, narrowed by `select`/`ignore`
    ID prefixes; the machine rules are left out for job files alone, as `gpudoctor lint` does)."""
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.engine import evaluate as run_rules

    if rules is None:
        rules = rules_for_run(select, ignore, host=snapshot.source.get("kind") != "files")
    return run_rules(snapshot, rules)


def format_report(report: Report, fmt: str = "plain", quiet: bool = False) -> str:
    """The report as text: plain, json, markdown or prometheus (rich is for terminals: plain without colour)."""
    from gpudoctor.render import render_report

    stream = io.StringIO()
    render_report(report, "plain" if fmt == "rich" else fmt, stream, quiet=quiet)
    return stream.getvalue()
