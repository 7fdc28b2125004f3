"""`gpudoctor snapshot`: record this machine's facts as JSON (secrets redacted) to replay elsewhere."""

from __future__ import annotations

import argparse
import json

from gpudoctor.cli.common import add_force_option, output_stream, path
from gpudoctor.cli.options import add_from_option, add_machine_options, gather_request
from gpudoctor.gather import catalog_groups, gather


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("snapshot", help="record the facts as JSON (secrets redacted)")
    parser.add_argument("--output", "-o", type=path, metavar="FILE", help="write to FILE (default: stdout)")
    add_force_option(parser)
    add_from_option(parser)
    add_machine_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    snapshot = gather(gather_request(args, catalog_groups() | {"env"}))
    with output_stream(args) as stream:
        json.dump(snapshot.to_json(), stream, indent=2, ensure_ascii=False)
        stream.write("\n")
    return 0
