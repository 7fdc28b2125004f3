"""`gpudoctor check`: gather facts (live, snapshot or pasted report), evaluate the rules, report."""

from __future__ import annotations

import argparse
import os
import sys
import time

from gpudoctor.cli.common import (UsageError, add_output_options, add_selection_options, fleet_format, output_format,
                                  output_stream, path, render_fleet, selected_rules)
from gpudoctor.cli.options import add_env_file_option, add_from_option, add_machine_options, gather_request
from gpudoctor.cli.training import add_training_options
from gpudoctor.engine import evaluate
from gpudoctor.errors import InputError
from gpudoctor.gather import gather, groups_for
from gpudoctor.model import exit_code
from gpudoctor.render import render_report


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("check", help="check this machine (or a recorded one) against every rule")
    parser.add_argument("--snapshot", type=path, metavar="FILE",
                        help="evaluate a recorded snapshot instead of this machine")
    parser.add_argument("--fleet", action="store_true",
                        help="under torchrun/srun: gather every rank's facts on rank 0 (torch.distributed, gloo) and "
                             "report per node and across nodes (GD8xx); needs torch")
    add_from_option(parser)
    parser.add_argument("--script", type=path, action="append", default=[], metavar="FILE",
                        help="also analyse this training script statically (never imported or run); repeatable")
    parser.add_argument("--ds-config", type=path, metavar="FILE",
                        help="also check this DeepSpeed config (JSON) and use it for the precision rules")
    add_env_file_option(parser)
    add_training_options(parser)
    add_machine_options(parser)
    add_selection_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "fleet", False):
        return run_fleet(args)
    started = time.monotonic()
    rules = selected_rules(args)
    snapshot = gather(gather_request(args, groups_for(rules)))
    if getattr(args, "policy", None):
        snapshot.source["policy"] = args.policy  # so the report's `gpudoctor fix` hint names it too
    report = evaluate(snapshot, rules, started, args.site_rule_ids)
    with output_stream(args) as stream:
        render_report(report, output_format(args), stream, quiet=args.quiet)
    return exit_code(report.worst(), args.fail_on)


RENDEZVOUS_TIMEOUTS = 4  # `check --fleet` meets the other ranks within 4 × --timeout (a minute by default)


def run_fleet(args: argparse.Namespace) -> int:
    """`check --fleet` on one rank: probe this machine, send the snapshot to rank 0, which reports for everyone."""
    from gpudoctor.bench.exchange import ExchangeError
    from gpudoctor.fleet import (evaluate_fleet, gather as gather_ranks, gloo_interface, import_distributed,
                                 launcher_rank, node_name, rendezvous_failure, share_verdict,
                                 snapshots_from_payloads)

    started = time.monotonic()
    if getattr(args, "snapshot", None) or getattr(args, "from_reports", None):
        raise UsageError("--fleet gathers every rank's live facts; for recorded snapshots use "
                         "`gpudoctor fleet SNAPSHOT...`")
    fmt = fleet_format(args)
    rank = launcher_rank()
    dist = import_distributed()
    rules = selected_rules(args)
    snapshot = gather(gather_request(args, groups_for(rules)))
    payload = {"node": node_name(snapshot, rank.rank), "snapshot": snapshot.to_json()}
    interface = gloo_interface(os.environ, (snapshot.facts.get("host") or {}).get("interfaces"))
    if interface:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # gloo reads it when the process group starts
    try:
        gathered = gather_ranks(dist, rank, payload, timeout_s=RENDEZVOUS_TIMEOUTS * args.timeout)
    except ExchangeError as exc:  # a rank sent something that is not JSON
        share_verdict(dist, rank, 2)
        raise UsageError(f"check --fleet: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - a failed rendezvous is the job's network, said in one line
        raise UsageError(rendezvous_failure(rank.rank, exc, interface)) from None
    code = 0
    if rank.rank == 0:
        try:
            fleet = evaluate_fleet(snapshots_from_payloads(gathered), rules, started)
            code = render_fleet(args, fleet, fmt)
        except BaseException as exc:
            share_verdict(dist, rank, 2 if isinstance(exc, InputError) else 3)
            raise
    try:
        code = share_verdict(dist, rank, code)
    except Exception:  # noqa: BLE001 - rank 0 has reported; the others fall back to their own "no verdict"
        pass
    sys.stdout.flush()
    return code
