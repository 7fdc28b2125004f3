"""`gpudoctor lint FILE...`: the host-independent rules over job files only (env files, job scripts,
Kubernetes manifests, Dockerfiles, training scripts, DeepSpeed configs). No machine probing."""

from __future__ import annotations

import argparse
import time

from gpudoctor.cli.common import (add_output_options, add_selection_options, output_format, output_stream, path,
                                  selected_rules)
from gpudoctor.engine import evaluate
from gpudoctor.gather import Request, gather
from gpudoctor.model import exit_code
from gpudoctor.render import render_report


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check job files (env, sbatch, k8s, Dockerfile, scripts) only")
    parser.add_argument("files", type=path, nargs="+", metavar="PATH",
                        help="job files (env, shell/sbatch, K8s, Dockerfile, DeepSpeed config, .py), or folders to "
                             "lint recursively")
    add_selection_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    snapshot = gather(Request(files=tuple(args.files)))
    rules = selected_rules(args, host=False)
    report = evaluate(snapshot, rules, started, args.site_rule_ids)
    with output_stream(args) as stream:
        render_report(report, output_format(args), stream, quiet=True)
    return exit_code(report.worst(), args.fail_on)
