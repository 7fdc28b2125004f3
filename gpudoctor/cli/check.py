"""`gpudoctor check`: gather facts (live, snapshot or pasted report), evaluate the rules, report."""

from __future__ import annotations

import argparse
import os
import sys
import time

from gpudoctor.cli.common import (
    UsageError,
    add_output_options,
    add_selection_options,
    fleet_format,
    load_for_judging,
    output_format,
    output_stream,
    path,
    render_fleet,
    selected_rules,
    to_file,
)
from gpudoctor.cli.options import add_env_file_option, add_from_option, add_machine_options, gather_request
from gpudoctor.cli.training import add_training_options
from gpudoctor.errors import InputError
from gpudoctor.gather import gather, groups_for
from gpudoctor.render import BY_NAME, render_report


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
    parser.add_argument("--json-report", type=path, metavar="FILE",
                        help="also write the gpudoctor.report/1 JSON document to FILE (beside --format's output, "
                             "e.g. a drain reason)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "fleet", False):
        return run_fleet(args)
    started = time.monotonic()
    rules = selected_rules(args)
    fmt = output_format(args)
    snapshot = gather(gather_request(args, groups_for(rules)),
                      meanwhile=lambda: load_for_judging(rules, BY_NAME[fmt].writer))
    from gpudoctor.engine import evaluate  # imported by load_for_judging while the probes ran
    from gpudoctor.model import exit_code

    if getattr(args, "policy", None):
        snapshot.source["policy"] = args.policy  # so the report's `gpudoctor fix` hint names it too
    if to_file(args):
        snapshot.source["output"] = args.output  # the file's own name labels its Prometheus series
    report = evaluate(snapshot, rules, started, args.site_rule_ids)
    if args.json_report:
        write_json_report(report, args.json_report, args.force)
    with output_stream(args) as stream:
        render_report(draining(report, args.fail_on) if fmt == "drain-reason" else report, fmt, stream,
                      quiet=args.quiet)
    return exit_code(report.worst(), args.fail_on)


def draining(report, fail_on: str):
    """The report with only the findings at or above --fail-on: those a drain reason names."""
    import dataclasses

    from gpudoctor.model import Severity

    floor = Severity.parse(fail_on) if fail_on != "never" else Severity.ERROR + 1
    return dataclasses.replace(report, findings=tuple(f for f in report.findings if f.severity >= floor))


def write_json_report(report, target: str, force: bool) -> None:
    """`--json-report FILE`: the JSON document beside the main output, written as --output writes."""
    import io

    from gpudoctor.files import write_file

    buffer = io.StringIO()
    render_report(report, "json", buffer)
    try:
        write_file(target, buffer.getvalue(), force=force)
    except OSError as exc:
        raise UsageError(f"cannot write {target!r}: {exc.strerror or exc}") from None


RENDEZVOUS_TIMEOUTS = 4  # each step of `check --fleet`'s rendezvous waits at most 4 × --timeout (a minute by default)
FLEET = "check --fleet"


def run_fleet(args: argparse.Namespace) -> int:
    """`check --fleet` on one rank: probe this machine, send the snapshot to rank 0, which reports for everyone
    and tells the others its exit status."""
    from gpudoctor.fleet import FleetError, evaluate_fleet, gloo_interface, node_name, snapshots_from_payloads
    from gpudoctor.rendezvous import (
        SNAPSHOT_LIMIT,
        Group,
        PeerDataError,
        RendezvousError,
        import_distributed,
        launched_rank,
    )

    started = time.monotonic()
    if getattr(args, "snapshot", None) or getattr(args, "from_reports", None):
        raise UsageError("--fleet gathers every rank's live facts; for recorded snapshots use "
                         "`gpudoctor fleet SNAPSHOT...`")
    fmt = fleet_format(args)
    rank = launched_rank(FLEET)
    if rank is None:
        raise FleetError("check --fleet needs a launcher: run it under torchrun (`torchrun --nproc-per-node N -m "
                         "gpudoctor check --fleet`) or srun (one task per node or per GPU); for snapshot files use "
                         "`gpudoctor fleet SNAPSHOT...`")
    import_distributed(FLEET)  # no torch: said before the probes run
    rules = selected_rules(args)
    snapshot = gather(gather_request(args, groups_for(rules)))
    payload = {"node": node_name(snapshot, rank.rank), "snapshot": snapshot.to_json()}
    interface = gloo_interface(os.environ, (snapshot.facts.get("host") or {}).get("interfaces"))
    if interface:
        os.environ["GLOO_SOCKET_IFNAME"] = interface  # gloo reads it when the process group starts
    with Group(rank, FLEET, RENDEZVOUS_TIMEOUTS * args.timeout, interface=interface) as group:
        try:
            gathered = group.gather_json(payload, SNAPSHOT_LIMIT, "its snapshot")
            code = 0
            if gathered is not None:  # rank 0, which received every rank's snapshot
                code = render_fleet(args, evaluate_fleet(snapshots_from_payloads(gathered), rules, started), fmt)
        except Exception as exc:
            if rank.rank == 0 and (isinstance(exc, PeerDataError) or not isinstance(exc, RendezvousError)):
                _tell_the_others(group, 2 if isinstance(exc, InputError) else 3)
            raise
        code = group.broadcast_int(code)
    if rank.rank != 0 and code > 1:
        raise RendezvousError(f"{FLEET}: rank 0 could not report for the fleet (exit status {code}; its output "
                              "says why)")
    sys.stdout.flush()
    return code


def _tell_the_others(group, code: int) -> None:
    """Rank 0 failed after the gather: its status to the others, who would otherwise wait for it (best effort:
    rank 0's own error is what is said)."""
    from gpudoctor.rendezvous import RendezvousError

    try:
        group.broadcast_int(code)
    except RendezvousError:
        pass
