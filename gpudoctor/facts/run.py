"""A run's ranks read together (the `run` facts, gpudoctor.ingest.run_logs): who failed first, who only waited,
and where the ranks' collectives diverged. GD430–GD433 and the report's timeline read it the same way.

A rank *failed* when its first error is its own (an exception, an out-of-memory, an Xid, an NCCL WARN, a SIGKILL);
it *waited* when its first error is about another rank (a collective or socket timeout, a peer that closed the
connection, the launcher's SIGTERM after another rank died). Which of several failing ranks was first is told by
the times on their lines; without them it is not told.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

TIMELINE_ROWS = 16


def label(entry: Dict[str, Any]) -> str:
    """`rank 3 (gpu-a02)`, `local rank 1 on gpu-a02`, `rank ? (worker.log)`."""
    node = entry.get("node")
    if isinstance(entry.get("rank"), int):
        return f"rank {entry['rank']}" + (f" ({node})" if node else "")
    if isinstance(entry.get("local_rank"), int):
        return f"local rank {entry['local_rank']}" + (f" on {node}" if node else "")
    if isinstance(entry.get("pid"), int):
        return f"rank ? ({node} pid {entry['pid']})"
    files = entry.get("files") or ["?"]
    return f"rank ? ({files[0]})"


def ranks_text(entries: List[Dict[str, Any]], most: int = 12) -> str:
    """`ranks 0, 1, 3` (the first `most`, then how many more)."""
    numbered = all(isinstance(e.get("rank"), int) for e in entries)
    named = [str(e["rank"]) if numbered else label(e) for e in entries]
    if not named:
        return "no rank"
    head = ", ".join(named[:most]) + (f" and {len(named) - most} more" if len(named) > most else "")
    return (("rank " if len(named) == 1 else "ranks ") if numbered else "") + head


def _signature(event: Dict[str, Any]) -> str:
    """What kind of failure an event is, for "every rank failed alike": its kind, an exception's type."""
    if event.get("kind") == "exception":
        return "exception " + str(event.get("what", "")).split(":", 1)[0]
    return str(event.get("kind"))


def own_error(entry: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    cause = entry.get("first_cause")
    return cause if isinstance(cause, dict) else None


def failure(entry: Dict[str, Any]) -> Dict[str, Any]:
    """The own error of a rank that failed ({} for one that did not)."""
    return own_error(entry) or {}


def waited(entry: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The rank's first sign of waiting for another rank (a launcher's SIGTERM is not one: it is being stopped)."""
    event = entry.get("first_waiting")
    return event if isinstance(event, dict) and event.get("kind") != "sigterm" else None


@dataclass
class Postmortem:
    """A run's ranks sorted by how each ended: failed, waiting for another, silent; who failed first."""

    ranks: List[Dict[str, Any]]
    failed: List[Dict[str, Any]] = field(default_factory=list)      # ranks with an error of their own
    waiting: List[Dict[str, Any]] = field(default_factory=list)     # ranks whose first error was about another
    silent: List[Dict[str, Any]] = field(default_factory=list)      # no error of their own, no waiting either
    first: List[Dict[str, Any]] = field(default_factory=list)       # who failed first ([] when not told)
    alike: bool = False                                              # every rank failed the same way
    basis: str = ""                                                  # how the order was told, or why not


def postmortem(run: Dict[str, Any]) -> Postmortem:
    ranks = [r for r in run.get("ranks") or [] if isinstance(r, dict)]
    found = Postmortem(ranks)
    found.failed = [r for r in ranks if own_error(r)]
    found.waiting = [r for r in ranks if not own_error(r) and waited(r)]
    found.silent = [r for r in ranks if not own_error(r) and not waited(r)]
    if found.failed:
        found.first, found.alike, found.basis = _failed_first(found)
    else:
        found.first, found.basis = _silent_first(found)
    return found


def _silent_first(found: Postmortem) -> Tuple[List[Dict[str, Any]], str]:
    """Where no rank printed an error of its own: the silent ranks came first when more ranks waited (for them)."""
    if found.waiting and found.silent and len(found.silent) < len(found.waiting):
        return found.silent, ("no rank printed an error of its own: the others waited for "
                              f"{ranks_text(found.silent)}, which printed none (it hung, or died without a word)")
    return [], "no rank printed an error of its own"


def _failed_first(found: Postmortem) -> Tuple[List[Dict[str, Any]], bool, str]:
    """(first, alike, basis) among the ranks with an error of their own: none first on a collective mismatch or
    when all failed alike, the only one, or the earliest by the times on their lines."""
    failed = found.failed
    if all(failure(r).get("kind") == "collective_mismatch" for r in failed):
        return [], False, ("the ranks stopped on a collective mismatch torch detected: no rank failed first, the rank "
                           "that called another collective did (GD432)")
    if len(failed) > 1 and len(failed) == len(found.ranks) and len({_signature(failure(r)) for r in failed}) == 1:
        return [], True, "every rank failed the same way"
    if len(failed) == 1:
        return failed, False, ("the only rank with an error of its own; the others waited" if found.waiting else
                               "the only rank with an error of its own")
    first = _earliest(failed)
    if first:
        return first, False, "by the times on the ranks' error lines (or the lines above them)"
    return [], False, (f"{ranks_text(failed)} failed on their own and not every error line carries a time: which was "
                       "first cannot be told")


def _earliest(failed: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The ranks whose error is known to come first: a time of its own (`t`) before every other rank's time, its
    own or the lower bound a line above it gives (`after`); [] when that cannot be told."""
    bounds = [(failure(r).get("t"), failure(r).get("after"), r) for r in failed]
    if any(t is None and after is None for t, after, _ in bounds):
        return []
    exact = sorted((t, id(r), r) for t, _, r in bounds if t is not None)
    if not exact:
        return []
    t0 = exact[0][0]
    tied = [r for t, _, r in exact if t == t0]
    later = all((t if t is not None else after) > t0 for t, after, r in bounds if r not in tied)
    return tied if later else []


def reached(entry: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The last collective the rank is known to have entered: {seq, op, sizes, source, where}."""
    best: Optional[Dict[str, Any]] = None
    dump = _dump(entry)
    collectives = [c for c in main_group(dump.get("collectives") or []) if isinstance(c.get("seq"), int)]
    if collectives:
        last = collectives[-1]
        best = {"seq": last["seq"], "op": last.get("op"), "sizes": last.get("sizes"), "source": "flight recorder",
                "where": dump.get("file"), "state": last.get("state")}
    for key, source in (("collective", "watchdog"), ("fingerprint", "collective fingerprint")):
        item = entry.get(key)
        if isinstance(item, dict) and isinstance(item.get("seq"), int) and (best is None or item["seq"] > best["seq"]):
            best = {"seq": item["seq"], "op": item.get("op"), "sizes": item.get("shape"), "source": source,
                    "where": item.get("where")}
    if isinstance(entry.get("enqueued"), int) and (best is None or entry["enqueued"] > best["seq"]):
        best = {"seq": entry["enqueued"], "op": None, "source": "last enqueued work", "where": None}
    return best


def _dump(entry: Dict[str, Any]) -> Dict[str, Any]:
    """The rank's flight-recorder dump ({} without one)."""
    dump = entry.get("dump")
    return dump if isinstance(dump, dict) else {}


def main_group(collectives: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """A dump's entries of the default process group (else of its most common group): sequence numbers count per
    group, so only one group's are compared across ranks."""
    groups = Counter(str(c.get("group")) for c in collectives if isinstance(c, dict))
    if not groups:
        return []
    group = next((g for g in ("default_pg", "pg 0") if g in groups), groups.most_common(1)[0][0])
    return [c for c in collectives if isinstance(c, dict) and str(c.get("group")) == group]


def collectives_at(entry: Dict[str, Any]) -> Dict[int, Tuple[str, Any, str]]:
    """Every collective the rank shows, by sequence number: (op, sizes, source); what the rank itself printed (torch's
    fingerprint, the watchdog's line) before its flight-recorder dump."""
    seen: Dict[int, Tuple[str, Any, str]] = {}
    for key, source in (("fingerprint", "collective fingerprint"), ("collective", "watchdog")):
        item = entry.get(key)
        if isinstance(item, dict) and isinstance(item.get("seq"), int) and item.get("op"):  # the watchdog: no sizes
            seen.setdefault(item["seq"], (str(item["op"]), item.get("shape") if key == "fingerprint" else None, source))
    dump = _dump(entry)
    for c in main_group(dump.get("collectives") or []):
        if isinstance(c.get("seq"), int) and c.get("op"):
            seen.setdefault(c["seq"], (str(c["op"]), c.get("sizes"), "flight recorder"))
    return seen


def _shape(sizes: Any) -> Optional[str]:
    """Sizes as one string whatever the source: a dump's `[[1024, 8]]`, a fingerprint's `1024, 8` → `1024,8`."""
    if sizes is None or sizes == "":
        return None
    if isinstance(sizes, list):
        first = sizes[0] if sizes and isinstance(sizes[0], list) else sizes
        return ",".join(str(d) for d in first)
    return str(sizes).replace(" ", "").strip("[]")


def mismatches(ranks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Sequence numbers at which ranks called different collectives or sizes: [{seq, majority: (op, sizes),
    odd: [(entry, op, sizes, source)]}], the first such sequence number first."""
    by_seq: Dict[int, List[Tuple[Dict[str, Any], str, Any, str]]] = {}
    for entry in ranks:
        for seq, (op, sizes, source) in collectives_at(entry).items():
            by_seq.setdefault(seq, []).append((entry, op, sizes, source))
    found = []
    for seq in sorted(by_seq):
        calls = by_seq[seq]
        kinds = Counter((op, _shape(sizes)) for _, op, sizes, _ in calls)
        ops = Counter(op for _, op, _, _ in calls)
        if len(ops) < 2 and len({k for k in kinds if k[1] is not None}) < 2:
            continue
        (major_op, major_sizes), count = kinds.most_common(1)[0]
        majority: Tuple[Optional[str], Optional[str]] = (major_op, major_sizes)
        if count * 2 <= len(calls):
            odd = calls  # no majority: every call is listed
            majority = (None, None)
        else:
            odd = [c for c in calls if c[1] != major_op or (major_sizes is not None and _shape(c[2]) is not None
                                                            and _shape(c[2]) != major_sizes)]
        if odd:
            found.append({"seq": seq, "majority": majority, "odd": odd, "calls": len(calls)})
    return found


def stragglers(ranks: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], int]:
    """(ranks whose last logged step is behind the step most ranks reached, that step); a straggler is a minority."""
    steps = [r["step"] for r in ranks if isinstance(r.get("step"), int)]
    if len(steps) < 2:
        return [], 0
    common, count = Counter(steps).most_common(1)[0]
    behind = [r for r in ranks if isinstance(r.get("step"), int) and r["step"] < common]
    if count * 2 <= len(steps) or not behind:
        return [], common
    return behind, common


def timeline(run: Dict[str, Any], rows: int = TIMELINE_ROWS) -> List[Dict[str, Any]]:
    """Each rank's first event, the earliest first (those with a time of their own, then those without in rank
    order); at most `rows`, the ranks that failed first and the silent ones kept."""
    found = postmortem(run)
    items: List[Dict[str, Any]] = []
    for entry in found.ranks:
        event = own_error(entry) or waited(entry) or entry.get("first_waiting")
        if not isinstance(event, dict):
            if entry in found.silent:
                items.append({"rank": label(entry), "what": "no error of its own", "entry": entry})
            continue
        role = "failed" if own_error(entry) else ("waited" if waited(entry) else "stopped")
        items.append({"rank": label(entry), "role": role, "what": event.get("what"), "time": event.get("time"),
                      "time_from": "line" if event.get("t") is not None else ("above" if event.get("time") else None),
                      "t": event.get("t", event.get("after")), "where": event.get("where"),
                      "step": entry.get("step"), "entry": entry})
    items.sort(key=lambda i: (i.get("t") is None, i.get("t") or 0.0))
    first = [i for i in items if i["entry"] in found.first]
    rest = [i for i in items if i["entry"] not in found.first]
    kept = (first + rest)[:rows]
    kept.sort(key=lambda i: (i.get("t") is None, i.get("t") or 0.0))
    return [{k: v for k, v in i.items() if k not in ("entry", "t") and v is not None} for i in kept]


def exported(event: Any) -> Optional[Dict[str, Any]]:
    """An event as the JSON report gives it: its time as printed and whether it is the line's own or one above."""
    if not isinstance(event, dict):
        return None
    out = {k: v for k, v in event.items() if k not in ("t", "after")}
    if event.get("time"):
        out["time_from"] = "line" if event.get("t") is not None else "above"
    return out


def summary(run: Dict[str, Any]) -> Dict[str, Any]:
    """The report's `run` part (JSON): per-rank first events, the first failing rank and node, the divergence."""
    found = postmortem(run)
    first_events = []
    for entry in found.ranks:
        event = own_error(entry) or entry.get("first_waiting")
        first_events.append({"rank": entry.get("rank"), "local_rank": entry.get("local_rank"),
                             "node": entry.get("node"), "label": label(entry), "files": entry.get("files") or [],
                             "role": "failed" if own_error(entry) else
                             ("waited" if waited(entry) else ("stopped" if event else "silent")),
                             "event": exported(event), "step": entry.get("step"), "last_collective": reached(entry),
                             "exit_code": (entry.get("exit") or {}).get("code")})
    odd = mismatches(found.ranks)
    divergence = None
    if odd:
        m = odd[0]
        divergence = {"kind": "mismatch", "seq": m["seq"], "majority_op": m["majority"][0],
                      "ranks": [e.get("rank") for e, _, _, _ in m["odd"]],
                      "ops": [op for _, op, _, _ in m["odd"]]}
    else:
        short = stopped_short(found.ranks)
        if short:
            divergence = {"kind": "stopped_short", "seq": short[1], "ranks": [e.get("rank") for e in short[0]]}
    return {"ranks": len(found.ranks), "nodes": run.get("nodes") or [],
            "first_failing": [{"rank": e.get("rank"), "node": e.get("node"), "label": label(e), "step": e.get("step"),
                               "event": exported(own_error(e))}
                              for e in found.first],
            "alike": found.alike, "order": found.basis,
            "waiting": [e.get("rank") for e in found.waiting], "divergence": divergence,
            "first_events": first_events, "unplaced": run.get("unplaced") or []}


def last_seq(entry: Dict[str, Any], source: str) -> Optional[int]:
    if source == "flight recorder":
        dump = _dump(entry)
        seqs = [c["seq"] for c in main_group(dump.get("collectives") or []) if isinstance(c.get("seq"), int)]
        return max(seqs) if seqs else None
    if source == "last enqueued work":
        return entry["enqueued"] if isinstance(entry.get("enqueued"), int) else None
    item = entry.get("collective" if source == "watchdog" else "fingerprint")
    return item["seq"] if isinstance(item, dict) and isinstance(item.get("seq"), int) else None


SOURCES = ("flight recorder", "watchdog", "last enqueued work", "collective fingerprint")


def stopped_short(ranks: List[Dict[str, Any]]) -> Optional[Tuple[List[Dict[str, Any]], int, str]]:
    """(the ranks whose last collective is behind the one most ranks reached, that sequence number, the source that
    shows it: the flight recorder, the watchdog's lines …); one source at a time, the one that covers most ranks;
    None when no rank is behind (or fewer than two ranks show one)."""
    best: List[Tuple[Dict[str, Any], int]] = []
    source = ""
    for name in SOURCES:
        known = [(r, seq) for r in ranks for seq in (last_seq(r, name),) if seq is not None]
        if len(known) > len(best):
            best, source = known, name
    if len(best) < 2:
        return None
    top, count = Counter(seq for _, seq in best).most_common(1)[0]
    behind = [r for r, seq in best if seq < top]
    if not behind or count * 2 <= len(best) and len(best) > 2:
        return None
    return behind, top, source


def without_collectives(ranks: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The ranks that show no collective in any source."""
    return [r for r in ranks if all(last_seq(r, name) is None for name in SOURCES)]
