"""GD430–GD433: a run's ranks read together (`check --from DIR`): the rank that failed first and the ranks that
only waited, the rank that stopped a collective short, ranks that called different collectives, a straggler.
Pure functions of the `run` facts (gpudoctor.ingest.run_logs) through gpudoctor.facts.run."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.run import (
    failure,
    label,
    last_seq,
    mismatches,
    own_error,
    postmortem,
    ranks_text,
    stopped_short,
    stragglers,
    without_collectives,
)
from gpudoctor.model import Severity


def _run(facts) -> dict:
    run = facts.get("run", None)
    if not isinstance(run, dict) or not isinstance(run.get("ranks"), list):
        raise MissingFact("run.ranks")
    if sum(1 for r in run["ranks"] if isinstance(r, dict)) < 2:
        raise MissingFact("run.ranks", "the logs of fewer than two ranks")
    return run


def _when(event: dict) -> str:
    if event.get("t") is not None:
        return f" at {event['time']}"
    return f" (after {event['time']}, the last time above it)" if event.get("time") else ""


def _step(entry: dict) -> str:
    return f", last step logged {entry['step']}" if isinstance(entry.get("step"), int) else ""


@check("GD430")
def first_failure(facts, rule):
    found = postmortem(_run(facts))
    if found.alike:
        shared = failure(found.failed[0])
        yield rule.finding(
            f"every rank ({len(found.failed)}) failed the same way ({shared.get('what')}): no rank failed first; the "
            "cause is the same on each (the other findings name it)",
            severity=Severity.INFO, evidence={"ranks": len(found.failed), "event": shared.get("where")},
            fix=rule.fix(case="alike"))
        return
    if not found.first:
        yield from _no_first(found, rule)
        return
    entry = found.first[0]
    event = own_error(entry)
    others = _others(found)
    named = ranks_text(found.first) if len(found.first) > 1 else label(entry)
    yield rule.finding(
        f"{named} failed first{_step(entry)}: {_what_failed(entry, event)}"
        + (f"; {'; '.join(others)}" if others else "") + f" (order: {found.basis})",
        evidence={"rank": entry.get("rank"), "node": entry.get("node"), "step": entry.get("step"),
                  "log": (event or {}).get("where"), "line": (event or {}).get("line"),
                  "waiting": [r.get("rank") for r in found.waiting]},
        fix=rule.fix(case="silent") if event is None else rule.fix())


def _others(found) -> list:
    """What the other ranks did: only waited for the first, or printed no error of their own."""
    stopped = [r for r in found.silent if r not in found.first]
    others = []
    if found.waiting:
        others.append(f"{ranks_text(found.waiting)} only waited for it (their first error is a timeout or a lost "
                      "peer)")
    if stopped:
        others.append(f"{ranks_text(stopped)} printed no error of {'its' if len(stopped) == 1 else 'their'} own")
    return others


def _what_failed(entry: dict, event) -> str:
    """The first rank's own error and where it is; or that it printed none (and how the launcher ended it)."""
    if event:
        rule_id = f" ({event['rule']})" if event.get("rule") else ""
        return f"{event.get('what')}{rule_id}{_when(event)}, {event.get('where')}"
    return "it printed no error of its own while the others waited for it (it hung, or died without a word" \
        + (f"; the launcher ended it with exit code {entry['exit']['code']}" if entry.get("exit") else "") + ")"


def _no_first(found, rule):
    """Where no rank is known to have failed first: a collective mismatch, several failures in no known order, or
    ranks that only waited for one whose log is missing."""
    if found.failed and "collective mismatch" in found.basis:
        yield rule.finding(f"{ranks_text(found.failed)}: {found.basis}", severity=Severity.INFO,
                           evidence={"ranks": [r.get("rank") for r in found.failed]}, fix=rule.fix(case="alike"))
    elif len(found.failed) > 1:
        yield rule.finding(
            f"{found.basis}: " + "; ".join(f"{label(r)}: {failure(r).get('what')} ({failure(r).get('where')})"
                                          for r in found.failed[:4]),
            severity=Severity.WARNING, evidence={"ranks": [r.get("rank") for r in found.failed]},
            fix=rule.fix(case="unordered"))
    elif found.waiting:
        yield rule.finding(
            f"{ranks_text(found.waiting)} only waited (their first error is a timeout or a lost peer) and no rank "
            "printed an error of its own: the rank they waited for is not among these logs, or the network "
            "failed between them (the other findings say what the logs show of it)",
            severity=Severity.WARNING, evidence={"waiting": [r.get("rank") for r in found.waiting]},
            fix=rule.fix(case="silent"))


@check("GD431")
def stopped_short_of_collective(facts, rule):
    run = _run(facts)
    ranks = [r for r in run["ranks"] if isinstance(r, dict)]
    short = stopped_short(ranks)
    if short:
        behind, seq, source = short
        yield rule.finding(
            f"{ranks_text(behind)} stopped short of collective {seq} that the other ranks reached (by the "
            f"{source}): " + "; ".join(f"{label(r)} last at collective {last_seq(r, source)}" for r in behind[:4])
            + "; the others waited in it until they timed out",
            evidence={"ranks": [r.get("rank") for r in behind], "seq": seq, "source": source},
            fix=rule.fix())
        return
    unseen = without_collectives(ranks)
    if unseen:
        raise MissingFact("run.ranks", f"the logs do not show the last collective of {ranks_text(unseen)}")


@check("GD432")
def collective_mismatch(facts, rule):
    run = _run(facts)
    ranks = [r for r in run["ranks"] if isinstance(r, dict)]
    found = mismatches(ranks)
    if found:
        first = found[0]
        op, sizes = first["majority"]
        calls = "; ".join(f"{label(e)} called {o}{f' {s}' if s else ''} ({src})" for e, o, s, src in first["odd"][:6])
        others = (f", where {first['calls'] - len(first['odd'])} rank(s) called {op}{f' {sizes}' if sizes else ''}"
                  if op else "")
        yield rule.finding(
            f"at collective {first['seq']} the ranks called different collectives or sizes: {calls}{others}; NCCL "
            "cannot match them, so the ranks hang until the watchdog ends them (or the sizes corrupt the result)",
            evidence={"seq": first["seq"], "ranks": [e.get("rank") for e, _, _, _ in first["odd"]],
                      "majority": op},
            fix=rule.fix())
        return
    if len([r for r in ranks if r not in without_collectives(ranks)]) < 2:
        raise MissingFact("run.ranks", "fewer than two ranks' logs show their collectives (the watchdog's WorkNCCL "
                                       "lines, flight-recorder dumps)")


@check("GD433")
def straggler(facts, rule):
    run = _run(facts)
    ranks = [r for r in run["ranks"] if isinstance(r, dict)]
    behind, common = stragglers(ranks)
    if behind:
        yield rule.finding(
            f"{ranks_text(behind)} lagged: " + "; ".join(f"{label(r)} last logged step {r['step']}"
                                                       for r in behind[:6])
            + f", where most ranks logged step {common}; a collective waits for its slowest rank",
            evidence={"ranks": [r.get("rank") for r in behind], "step": common}, fix=rule.fix())
        return
    if sum(1 for r in ranks if isinstance(r.get("step"), int)) < 2:
        raise MissingFact("run.ranks", "fewer than two ranks' logs show training progress (step lines)")
