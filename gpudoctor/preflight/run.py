"""One rank's preflight: the four phases in order, each within its deadline, then the verdicts on the reporting rank.

Every decision the ranks must share comes from collective data or from a verdict written once in the store, so no
rank goes on while another stops. A failed or late collective ends the phases on every rank: the ranks still alive
say so, and the lowest of them reports which did not finish. The reporting rank is rank 0, or the lowest rank
that arrived (or is alive) when rank 0 did not.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional, Sequence

from gpudoctor.model import FleetReport, PreflightPhase, PreflightReport
from gpudoctor.preflight import PreflightError
from gpudoctor.preflight.layout import Member, expected_layout, member_from_env, node_table
from gpudoctor.preflight.meeting import Meeting, StepFailed

if TYPE_CHECKING:  # imported with torch, once the ranks have met
    from gpudoctor.rendezvous import Group

VERDICT_RULES = ("GD806", "GD807", "GD808", "GD809")
DEFAULT_SELECT = ("GD1", "GD5", "GD8")  # the node rules that judge health, the fleet's and preflight's own
RESERVE_S = 4.0  # kept back from the budget for settling a failure and writing the report
GRACE_S = 3.0  # how long the ranks still alive after a failure wait for one another
PROBE_S = 15.0  # each node's probes in the agree phase, at most
SMALL = 64 * 1024  # bytes a rank may send as its arrival or its GPU figures
FIGURES_LIMIT = 4 * 1024 * 1024  # …as its fabric figures (a sweep's rows)
TIMING = "timing"  # the store's flag of a rank timing its device
# each phase's deadline, as a share of the time left when it starts (the meet phase has --timeout; the fabric the rest)
PHASE_SHARES = {"agree": 0.5, "gpus": 0.5, "fabric": 1.0}
COMPARED = frozenset({"host", "env", "nvml", "torch"})  # what the fleet rules compare between nodes (GD801–GD804)


@dataclass(frozen=True)
class Options:
    rules: Sequence  # the selected rules (catalog.rules_for_run)
    budget: float = 60.0
    timeout: float = 30.0  # the meet phase's deadline
    min_busbw: Optional[float] = None
    python: str = sys.executable
    quick: bool = False  # the agree phase reads torch's versions from its files instead of importing it
    limits: Optional[dict] = None  # the verdicts' fractions (SitePolicy.preflight_limits); None: rules/preflight.toml's


@dataclass
class Outcome:
    """What a rank ends with: the report on the reporting rank, None on the others (which take its exit status
    from the store)."""

    meeting: Meeting
    report: Optional[PreflightReport] = None
    note: str = ""  # a non-reporting rank's one line (it arrived after the others gave up)
    listeners: int = 0  # on the reporting rank: how many others wait for its exit status


class Clock:
    def __init__(self, budget: float):
        self.started = time.monotonic()
        self.budget = budget

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.started)

    def until_reserve(self, cap: float = float("inf")) -> float:
        return max(0.5, min(cap, self.left() - RESERVE_S))


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


@dataclass
class Preflight:
    member: Member
    options: Options
    clock: Clock
    meeting: Meeting
    facts: dict = field(default_factory=dict)
    phases: List[PreflightPhase] = field(default_factory=list)
    fleet: Optional[FleetReport] = None
    labels: dict = field(default_factory=dict)  # rank → node label
    current: str = ""
    phase_began: float = 0.0
    phase_ends: float = float("inf")
    group: Optional[Group] = None  # over the process group, for the exchanges (set when it starts)
    info: dict = field(default_factory=dict)  # this rank's device, as the GPU phase names it

    def exchange(self, what: str, call):
        """One of gpudoctor.rendezvous's bounded, checked exchanges (`call(group)`) as a step of this phase."""
        group = self.group
        assert group is not None, "an exchange before the process group started"
        seconds = self.deadline()
        group.timeout_s = seconds
        return self.meeting.step(what, lambda: call(group), seconds)

    def begin(self, name: str) -> None:
        """Start phase `name`: its deadline is its share of the time left (PHASE_SHARES), the reserve kept back."""
        self.current, self.phase_began = name, time.monotonic()
        self.phase_ends = self.phase_began + PHASE_SHARES.get(name, 1.0) * max(0.0, self.clock.left() - RESERVE_S)

    def deadline(self) -> float:
        """Seconds the next step of this phase may take: until the phase's deadline, at least half a second."""
        return max(0.5, min(self.phase_ends - time.monotonic(), self.clock.left() - RESERVE_S))

    def end(self, status: str, note: str = "") -> None:
        self.phases.append(PreflightPhase(self.current, status, round(time.monotonic() - self.phase_began, 3), note))
        self.current = ""

    # --- phase 1 -----------------------------------------------------------------------------------------------
    def meet(self) -> Optional[Outcome]:
        """None when every rank arrived; else the outcome (GD806 on the lowest rank that did). The phase runs from
        the start (torch imported) until the process group works (`process_group`)."""
        seconds = max(1.0, min(self.options.timeout, self.clock.left() - RESERVE_S))
        self.facts["meet_timeout_s"] = round(seconds, 3)
        verdict = self.meeting.meet(seconds)
        if verdict["met"]:
            return None
        arrived = verdict["arrived"]
        self.facts["nodes"] = node_table(arrived, expected_layout(self.member), self.member.world_size)
        self.end("bad", f"{len(arrived)} of {self.member.world_size} ranks arrived within {seconds:g} s")
        ranks = [item["rank"] for item in arrived]
        if self.member.rank not in ranks:
            return Outcome(self.meeting, note="the other ranks stopped waiting before this one arrived")
        if self.member.rank != min(ranks):
            return Outcome(self.meeting)
        return Outcome(self.meeting, self.finish(), listeners=len(ranks) - 1)

    def process_group(self):
        dist = self.meeting.process_group(self.clock.until_reserve(cap=30.0), self.clock.left())
        from gpudoctor.rendezvous import Group

        assert self.member.launched is not None, "member_from_env sets it"
        self.group = Group(self.member.launched, "preflight", self.clock.until_reserve())
        self.group.dist = dist  # the group meeting.process_group started on the launcher's store
        arrivals = self.exchange("exchanging arrivals", lambda group: group.all_gather_json(
            self.member.arrival(), SMALL, "its arrival"))
        self.facts["nodes"] = node_table(arrivals, expected_layout(self.member), self.member.world_size)
        for node in self.facts["nodes"]:
            for rank in node["ranks"]:
                self.labels[rank] = node["node"]
        self.end("ok", f"{self.member.world_size} ranks on {len(self.facts['nodes'])} nodes, torch "
                       f"{_torch_version()}")
        return dist

    # --- phase 2 -----------------------------------------------------------------------------------------------
    def agree(self, dist) -> bool:
        """Every node's facts through the node and fleet rules, on rank 0; False (on every rank) to stop."""
        from gpudoctor.rendezvous import SNAPSHOT_LIMIT

        self.begin("agree")
        node = self.labels[self.member.rank]
        first = self.member.rank == min(r for r, label in self.labels.items() if label == node)
        rules = [rule for rule in self.options.rules if rule.id not in VERDICT_RULES]
        payload = {"node": node, "snapshot": self._snapshot(rules)} if first else None
        gathered = self.exchange("exchanging the nodes' facts", lambda group: group.gather_json(
            payload, SNAPSHOT_LIMIT, "its node's facts"))
        stop = 0
        if self.member.rank == 0:
            from gpudoctor.fleet import evaluate_fleet
            from gpudoctor.model import Severity
            from gpudoctor.snapshot import SnapshotError, from_json

            nodes = []
            for item in gathered:
                if isinstance(item, dict):
                    try:
                        nodes.append((item["node"], from_json(item["snapshot"], item["node"])))
                    except (SnapshotError, KeyError, TypeError):
                        raise PreflightError(f"preflight: {item.get('node')} sent something that is not a "
                                             "gpudoctor snapshot") from None
            self.fleet = evaluate_fleet(nodes, rules)
            stop = int(any(f.severity >= Severity.ERROR for f in self.fleet.all_findings()))
        stop = self.exchange("sharing the verdict on the facts", lambda group: group.broadcast_int(
            stop, 0, "the verdict on the facts"))
        self.end("bad" if stop else "ok", "the nodes disagree or a node is unhealthy: stopped before any "
                 "collective on the GPUs" if stop else f"{len(set(self.labels.values()))} nodes agree")
        return not stop

    def _snapshot(self, rules) -> dict:
        from gpudoctor.gather import Request, gather, groups_for

        seconds = min(PROBE_S, max(1.0, (self.clock.left() - RESERVE_S) * 0.3))
        groups = groups_for(rules) | (COMPARED if any(rule.id.startswith("GD8") for rule in rules) else frozenset())
        snapshot = gather(Request(groups=groups, timeout=seconds, python=self.options.python,
                                  quick=self.options.quick))
        return snapshot.to_json()

    # --- phase 3 -----------------------------------------------------------------------------------------------
    def gpus(self, dist):
        from gpudoctor.preflight.measure import device_figures, device_of, identity

        self.begin("gpus")
        device, sizes = device_of(self.member.local_rank)
        info = identity(device)
        self.facts["device"] = device.type
        self.facts["backend"] = "nccl" if device.type == "cuda" else "gloo"
        self.info = {"node": self.labels[self.member.rank], "rank": self.member.rank, **info}
        figures = self.meeting.step("timing each GPU alone", lambda: device_figures(
            dist, device, info, sizes, lambda busy: self.meeting.mark(TIMING, busy)), self.deadline())
        mine = {**self.info, **figures}
        self.facts["gpus"] = self.exchange("exchanging the GPU figures", lambda group: group.all_gather_json(
            mine, SMALL, "its GPU figures"))
        self.end("ok", ("each rank's core in turn, one thread (no GPU)" if device.type == "cpu" else
                        f"{len(self.facts['gpus'])} GPUs"))
        return device, sizes

    # --- phase 4 -----------------------------------------------------------------------------------------------
    def fabric(self, dist, device, sizes) -> None:
        """All-reduce within each node, across the nodes, then between neighbouring pairs of nodes' first ranks."""
        from gpudoctor.preflight.measure import neighbour_pairs

        self.begin("fabric")
        backend = self.facts["backend"]
        nodes = {entry["node"]: entry["ranks"] for entry in self.facts["nodes"]}
        labels = list(nodes)
        pairs = [(labels[a], labels[b]) for a, b in neighbour_pairs(len(labels))]
        made = self.meeting.step("creating the fabric's groups", lambda: self._fabric_groups(dist, nodes, pairs),
                                 self.deadline())
        me, node = self.member.rank, self.labels[self.member.rank]
        run = dict(iters=20 if device.type == "cuda" else 10, warmup=5 if device.type == "cuda" else 2)
        mine: dict = {}
        if node in made["intra"]:
            figures = self._sweep(f"all-reduce within {node}", device, made["intra"][node], sizes.fabric_min,
                                  sizes.fabric_max, run)
            if me == min(nodes[node]):
                mine["intra"] = {"node": node, "ranks": nodes[node], **figures}
        if len(nodes) >= 2:
            figures = self._sweep("all-reduce across the nodes", device, made["cross"], sizes.fabric_min,
                                  sizes.fabric_max, run)
            if me == 0:
                mine["cross"] = {"nodes": labels, **figures}
        if pairs:
            mine["pairs"] = self._pair_rounds(dist, device, sizes.pair_bytes, run, nodes, made["pairs"])
        everyone = self.exchange("exchanging the fabric figures", lambda group: group.all_gather_json(
            mine, FIGURES_LIMIT, "its fabric figures"))
        self.facts["fabric"] = {
            "intra": [item["intra"] for item in everyone if "intra" in item],
            "cross": next((item["cross"] for item in everyone if "cross" in item), None),
            "pairs": [pair for item in everyone for pair in item.get("pairs", [])],
            "min_busbw_gbps": self.options.min_busbw,
        }
        self.end("ok", f"all-reduce on {backend}" + (" over this host's loopback" if device.type == "cpu" else ""))

    def _fabric_groups(self, dist, nodes: dict, pairs: List[tuple]) -> dict:
        """The process groups of the fabric phase, made on every rank in the same order: each node's ranks, every
        rank (None where the default group is it: on gloo), each pair of nodes' first ranks."""
        from gpudoctor.preflight.measure import new_group

        backend = self.facts["backend"]
        made: dict = {"intra": {}, "pairs": {}}
        for label, ranks in nodes.items():
            if len(ranks) >= 2:
                made["intra"][label] = new_group(dist, ranks, backend, self.deadline())
        made["cross"] = (new_group(dist, list(range(self.member.world_size)), backend, self.deadline())
                         if len(nodes) >= 2 and backend != "gloo" else None)
        for a, b in pairs:
            made["pairs"][(a, b)] = new_group(dist, [min(nodes[a]), min(nodes[b])], backend, self.deadline())
        return made

    def _sweep(self, step: str, device, group, low: int, high: int, run: dict) -> dict:
        """`bench nccl`'s all-reduce sweep from `low` to `high` bytes among `group`, as one step of this phase."""
        from gpudoctor.preflight.measure import sweep_figures

        return self.meeting.step(step, lambda: sweep_figures(device, group, low, high, timeout=self.deadline(), **run),
                                 self.deadline())

    def _pair_rounds(self, dist, device, size: int, run: dict, nodes: dict, groups: dict) -> List[dict]:
        """Each pair of nodes' first ranks, in rounds of disjoint pairs while the time allows: this rank's figures
        (those of the pairs it leads)."""
        from gpudoctor.preflight.measure import rounds

        go = self.exchange("deciding on pairs", lambda group: group.broadcast_int(
            int(self.clock.left() > RESERVE_S * 3), 0, "whether the pairs have time"))
        me, mine = self.member.rank, []
        for this in rounds(list(groups)) if go else []:
            for a, b in this:
                ranks = [min(nodes[a]), min(nodes[b])]
                if me in ranks:
                    figures = self._sweep(f"all-reduce between {a} and {b}", device, groups[(a, b)], size, size, run)
                    if me == min(ranks):
                        mine.append({"nodes": [a, b], "busbw_gbps": figures["busbw_gbps"], "wrong": figures["wrong"]})
            self.meeting.step("ending a round of pairs", dist.barrier, self.deadline())
        return mine

    # --- the end -----------------------------------------------------------------------------------------------
    def failed(self, failure: StepFailed) -> Outcome:
        """After a failed step: settle who is alive; the lowest rank alive reports. In the GPU phase, a rank still
        timing its device when every rank is alive is a straggler too slow to finish (GD807), not a failure."""
        phase = self.current
        if self.current:
            self.end("failed", f"{failure.step}: {failure.error}")
        slow = self.meeting.marked(TIMING) if phase == "gpus" else []
        verdict = self.meeting.settle_failure(failure, max(1.0, min(GRACE_S, self.clock.left())))
        alive = verdict["alive"]
        unfinished = [rank for rank in range(self.member.world_size) if rank not in alive]
        if slow and not unfinished:
            seconds = self.phases[-1].seconds
            self.facts["gpus"] = [{"node": self.labels.get(rank), "rank": rank, "unfinished_s": seconds}
                                  for rank in slow]
            self.facts.pop("failure", None)  # nothing failed: the fabric was not reached, GD808 stays unknown
        else:
            self.facts["failure"] = {
                "step": verdict["step"], "error": f"rank {verdict['rank']}: {verdict['error']}",
                "unfinished": [{"rank": rank, "node": self.labels.get(rank, f"the node of rank {rank}")}
                               for rank in unfinished]}
        if self.member.rank != min(alive, default=self.member.rank):
            return Outcome(self.meeting)
        return Outcome(self.meeting, self.finish(), listeners=len(alive) - 1)

    def finish(self) -> PreflightReport:
        from gpudoctor.engine import evaluate
        from gpudoctor.preflight.result import build
        from gpudoctor.snapshot import Snapshot

        rules = [rule for rule in self.options.rules if rule.id in VERDICT_RULES]
        verdicts = evaluate(Snapshot(facts={"preflight": self.facts}, source={"kind": "preflight", "paths": []}),
                            rules)
        done = {phase.name for phase in self.phases}
        for name in ("meet", "agree", "gpus", "fabric"):
            if name not in done:
                self.phases.append(PreflightPhase(name, "skipped"))
        return build(facts=self.facts, verdicts=verdicts, fleet=self.fleet, environ=os.environ,
                     launcher=self.member.launcher, world_size=self.member.world_size, budget_s=self.options.budget,
                     phases=tuple(self.phases), seconds=round(time.monotonic() - self.clock.started, 3))


def run(options: Options) -> Outcome:
    """This rank's preflight, from the launcher's variables to an Outcome (PreflightError: it cannot run here)."""
    clock = Clock(options.budget)
    member = member_from_env()
    meeting = Meeting(member, os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    flight = Preflight(member, options, clock, meeting)
    if options.limits is not None:
        flight.facts["limits"] = options.limits
    flight.begin("meet")
    from gpudoctor.rendezvous import import_distributed

    import_distributed("preflight")
    ended = flight.meet()
    if ended is not None:
        return ended
    try:
        dist = flight.process_group()
        if flight.agree(dist):
            device, sizes = flight.gpus(dist)
            flight.fabric(dist, device, sizes)
        if "fabric" in flight.facts:
            flight.facts["failure"] = None  # every collective finished
    except StepFailed as failure:
        return flight.failed(failure)
    if member.rank != 0:
        return Outcome(meeting)
    return Outcome(meeting, flight.finish(), listeners=member.world_size - 1)
