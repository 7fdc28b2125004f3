"""`gpudoctor lint FILE...`: the host-independent rules over job files only (env files, job scripts,
Kubernetes manifests, Dockerfiles, training scripts, DeepSpeed configs). No machine probing."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from gpudoctor.cli.common import (UsageError, add_output_options, add_selection_options, exit_code, output_format,
                                  output_stream, selected_rules)
from gpudoctor.engine import evaluate
from gpudoctor.files import read_file
from gpudoctor.render import render_report
from gpudoctor.snapshot import Snapshot


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check job files (env, sbatch, k8s, Dockerfile, scripts) only")
    parser.add_argument("files", nargs="+", metavar="FILE")
    add_selection_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": list(args.files)})
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"cannot read {name!r}: no such file")
        try:
            read_file(path, snapshot)
        except OSError as exc:
            raise UsageError(f"cannot read {name!r}: {exc.strerror or exc}") from None
    report = evaluate(snapshot, selected_rules(args, host=False), started)
    with output_stream(args) as stream:
        render_report(report, output_format(args), stream, quiet=True)
    return exit_code(report, args.fail_on)
