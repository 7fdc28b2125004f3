"""`gpudoctor fleet SNAPSHOT...`: one report for all of a job's nodes (GD8xx) from their snapshot files."""

from __future__ import annotations

import argparse
import time

from gpudoctor.cli.common import (
    add_output_options,
    add_selection_options,
    fleet_format,
    path,
    render_fleet,
    selected_rules,
)
from gpudoctor.render import FLEET_NAMES


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("fleet", help="compare snapshots of a job's nodes (per-node and cross-node "
                                                 "findings, GD8xx)")
    parser.add_argument("snapshots", type=path, nargs="+", metavar="SNAPSHOT",
                        help="snapshot files (`gpudoctor snapshot -o FILE` on each node), one per node or rank")
    add_selection_options(parser)
    add_output_options(parser, formats=FLEET_NAMES)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.fleet import evaluate_fleet, fleet_nodes, read_fleet

    started = time.monotonic()
    fmt = fleet_format(args)
    snapshots = read_fleet(args.snapshots)
    fleet = evaluate_fleet(fleet_nodes(snapshots, args.snapshots), selected_rules(args), started)
    return render_fleet(args, fleet, fmt)
