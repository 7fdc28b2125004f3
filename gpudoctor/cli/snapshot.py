"""`gpudoctor snapshot`: record this machine's facts as JSON (secrets redacted) to replay elsewhere."""

from __future__ import annotations

import argparse
import json

from gpudoctor.catalog import load_catalog
from gpudoctor.cli.check import OVERLAYS, add_from_option, add_machine_options, live_snapshot, report_snapshot
from gpudoctor.cli.common import output_stream
from gpudoctor.engine import needed_groups


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("snapshot", help="record the facts as JSON (secrets redacted)")
    parser.add_argument("--output", "-o", metavar="FILE", help="write to FILE (default: stdout)")
    add_from_option(parser)
    add_machine_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.from_reports:
        snapshot = report_snapshot(args.from_reports)
    else:
        snapshot = live_snapshot(args, needed_groups(load_catalog()) | {"host", "env"})
    for overlay in OVERLAYS:
        overlay(args, snapshot)
    with output_stream(args) as stream:
        json.dump(snapshot.to_json(), stream, indent=2, ensure_ascii=False)
        stream.write("\n")
    return 0
