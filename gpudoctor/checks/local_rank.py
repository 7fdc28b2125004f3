"""GD609: the local rank on the command line — the argument a launcher passes (`torch.distributed.launch`:
`--local-rank=N` from torch 2.0, `--local_rank=N` before; the deepspeed launcher: `--local_rank=N`) against the
option the script's argparse takes (or a parser with no such option, Hydra's included, that refuses it), and
scripts that wait for an argument their launcher (torchrun, accelerate) never passes."""

from __future__ import annotations

from typing import Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.jobs import jobs_with_scripts, where
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.knowledge import SETS_LOCAL_RANK_ENV, Release, version
from gpudoctor.model import Severity


def _flag(launcher: str, torch: Optional[str]) -> Tuple[str, Optional[bool]]:
    """(the option the launcher passes, whether that is known) — `torch.distributed.launch` changed it in torch 2.0."""
    if launcher != "torch.distributed.launch":
        return "--local_rank", True
    have = version(torch)
    if have is None:
        return "--local-rank", None
    return ("--local-rank" if have >= Release("2.0") else "--local_rank"), True


def _refused_by_parser(job: dict, script: dict, features: dict, torch: Optional[str], rule):
    """A script with no local-rank option whose parser stops at the launcher's `--local_rank=N` anyway."""
    parser = features.get("argv_parser")
    passing = next((entry for entry in job.get("launchers", []) if entry.get("passes_local_rank")), None)
    if not isinstance(parser, dict) or passing is None:
        return
    flag, known = _flag(passing.get("name"), torch)
    at = f"{script.get('path')}:{parser.get('line')}"
    how = ("Hydra's command line takes only key=value overrides" if parser.get("kind") == "hydra" else
           "the script's argparse has no local-rank option")
    note = "" if known else " (torch ≥ 2.0; `--local_rank=N` before)"
    yield rule.finding(
        f"{passing.get('name')} passes `{flag}=N`{note} to every rank, but {how} ({at} `{parser.get('what')}`): it "
        f"stops every rank with `error: unrecognized arguments: {flag}=0`",
        location=where(job),
        evidence={"launcher": passing.get("name"), "passes": flag, "options": [], "parser": parser.get("kind"),
                  "torch": torch},
        fix=rule.fix(case="hydra" if parser.get("kind") == "hydra" else "add_option",
                     values={"script": script.get("path"), "line": parser.get("line")}))


def local_rank_refused_in_log(facts, rule):
    for event in log_events(facts, "local_rank_refused")[:1]:
        script = event.get("script") or "the script"
        yield rule.finding(
            f"argparse refused the local-rank argument the launcher passed ({event.get('option')}) at "
            f"{event.get('where')}: {event['line']}",
            evidence={**cited(event), "script": event.get("script"), "passes": event.get("option")},
            fix=rule.fix(case="from_log", values={"script": script, "option": event.get("option")}))


def _set_from_env(features: dict) -> bool:
    """The script hands its namespace to deepspeed.initialize, which sets `local_rank` from LOCAL_RANK, and reads
    it only after that."""
    set_by = features.get("local_rank_set_by")
    return isinstance(set_by, dict) and not set_by.get("used_before")


@check("GD609", from_log=local_rank_refused_in_log)
def local_rank_argument(facts, rule):
    here = facts.get("torch.version", None)
    for job, script, features in jobs_with_scripts(facts):
        torch = (job.get("torch") or {}).get("version") or here  # the image's torch, where the job says which
        option = features.get("local_rank_option")
        if not isinstance(option, dict):
            yield from _refused_by_parser(job, script, features, torch, rule)
            continue
        passing = next((entry for entry in job.get("launchers", []) if entry.get("passes_local_rank")), None)
        if passing:
            yield from _argument_not_taken(job, script, features, option, passing, torch, rule)
        else:
            yield from _argument_never_passed(job, script, features, option, torch, rule)


def _option_said(script: dict, option: dict, torch: Optional[str]) -> Tuple[list, str, dict, dict]:
    """(the options the script takes, where, the fix's values, the finding's evidence) of its local-rank option."""
    takes = option.get("options") or []
    values = {"script": script.get("path"), "line": option.get("line"), "option": " / ".join(takes)}
    evidence = {"launcher": None, "options": takes, "default": option.get("default"), "torch": torch}
    return takes, f"{script.get('path')}:{option.get('line')}", values, evidence


def _argument_not_taken(job: dict, script: dict, features: dict, option: dict, passing: dict, torch, rule):
    """The launcher passes a local-rank argument the script's option is not spelt as: argparse stops every rank, or
    parse_known_args drops it (unless the script reads LOCAL_RANK)."""
    takes, at, values, evidence = _option_said(script, option, torch)
    flag, known = _flag(passing.get("name") or "", torch)
    if flag in takes:
        return
    evidence.update(launcher=passing.get("name"), passes=flag)
    version_note = "" if known else " (torch ≥ 2.0; the torch version is unknown here)"
    if option.get("parse_known"):
        if features.get("reads_local_rank_env") or _set_from_env(features):
            return
        yield rule.finding(
            f"{passing.get('name')} passes `{flag}=N`{version_note} but {at} takes only {' / '.join(takes)} "
            f"and the script parses with parse_known_args: the launcher's argument is ignored and the local "
            f"rank stays {option.get('default')!r} in every rank (all ranks on one GPU, or a crash)",
            severity=Severity.WARNING, location=where(job), evidence=evidence,
            fix=rule.fix(case="accept_both", values=values))
        return
    yield rule.finding(
        f"{passing.get('name')} passes `{flag}=N`{version_note} but {at} takes only {' / '.join(takes)}: "
        f"argparse stops every rank with `error: unrecognized arguments: {flag}=0`",
        severity=None if known else Severity.WARNING, location=where(job), evidence=evidence,
        fix=rule.fix(case="accept_both", values=values))


def _argument_never_passed(job: dict, script: dict, features: dict, option: dict, torch, rule):
    """A launcher that sets LOCAL_RANK in the environment and passes no argument, to a script that takes the local
    rank only from its option: it stays the default in every rank."""
    takes, at, values, evidence = _option_said(script, option, torch)
    starter = next((entry.get("name") for entry in job.get("launchers", [])
                    if entry.get("name") in SETS_LOCAL_RANK_ENV), None)
    if starter and not features.get("reads_local_rank_env") and not _set_from_env(features):
        evidence.update(launcher=starter)
        set_by = features.get("local_rank_set_by") or {}
        used = set_by.get("used_before") or {}
        later = (f"; {set_by['by']} ({script.get('path')}:{set_by['line']}) sets it from LOCAL_RANK, but "
                 f"line {used['line']} (`{used['what']}`) uses it before that" if used else "")
        yield rule.finding(
            f"{starter} sets LOCAL_RANK in the environment and passes no local-rank argument, but the script "
            f"takes it only from {' / '.join(takes)} ({at}): it stays {option.get('default')!r} in every rank "
            f"(all ranks on one GPU, or a crash){later}",
            severity=Severity.WARNING, location=where(job), evidence=evidence,
            fix=rule.fix(case="read_env", values=values))
