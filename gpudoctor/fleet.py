"""The fleet: several snapshots of one job's nodes (or ranks) judged one by one, then against each other.

Each node gets its own report from the normal rules; the GD8xx rules then read a `fleet` fact group built from
every node's facts and rule results, through the same engine. `check --fleet` gathers the snapshots of a running
job's ranks with torch.distributed (gloo); `gpudoctor fleet` reads snapshot files.
"""

from __future__ import annotations

import hashlib
import socket
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from gpudoctor.collector import collector_paused
from gpudoctor.engine import evaluate
from gpudoctor.errors import InputError
from gpudoctor.memo import VerdictMemo
from gpudoctor.model import FleetReport, Report, Severity
from gpudoctor.snapshot import Snapshot, SnapshotError, from_json, read_document

FLEET_PREFIX = "GD8"


class FleetError(InputError):
    """`check --fleet` cannot run here (no launcher, a rank's snapshot malformed): one line, exit 2."""


def failing(report: Report) -> List[str]:
    """Rules that fail on a node: a warning or an error (an info finding is advice, not a failure)."""
    return sorted({f.rule for f in report.findings if f.severity >= Severity.WARNING})


@collector_paused()
def evaluate_fleet(nodes: Sequence[Tuple[str, Snapshot]], rules, started: float = 0.0) -> FleetReport:
    """Every node's own report (rules outside GD8xx), then the GD8xx rules that compare nodes over all of them (not
    preflight's own, GD806–GD809, which judge what a preflight measured). Nodes whose recorded facts are identical
    (read_fleet's `digest`) are judged once; each keeps its own host and source. On nodes that differ, a rule's
    verdict is reused where the facts it read are the same (gpudoctor.memo)."""
    node_rules = [rule for rule in rules if not rule.id.startswith(FLEET_PREFIX)]
    fleet_rules = [rule for rule in rules if rule.id.startswith(FLEET_PREFIX) and "fleet.nodes" in rule.inputs]
    reports = []
    entries = []
    judged: Dict[str, Report] = {}
    memo = VerdictMemo()
    for name, snapshot in nodes:
        digest = snapshot.source.get("digest")
        if digest in judged:
            report = replace(judged[digest], facts=snapshot.facts, source=dict(snapshot.source))
        else:
            report = evaluate(snapshot, node_rules, memo=memo)
            if digest:
                judged[digest] = report
        reports.append((name, report))
        if snapshot.source.get("compared") is False:
            continue  # a log's lines that name no host: reported, never compared with the hosts
        entries.append({"node": name, "facts": snapshot.facts, "failed_rules": failing(report),
                        "passed_rules": sorted(report.passed)})
    paths = [path for _, snapshot in nodes for path in snapshot.source.get("paths", [])]
    fleet = Snapshot(facts={"fleet": {"nodes": entries}}, source={"kind": "fleet", "paths": paths})
    cross = evaluate(fleet, fleet_rules)
    return FleetReport(tuple(reports), cross, (time.monotonic() - started) if started else 0.0)


@collector_paused()
def read_fleet(paths: Sequence[str]) -> List[Snapshot]:
    """The snapshot files of a fleet, one at a time. A fact group exactly as a node read before holds it (its host
    group but for the host's name) is that node's group, checked against the schema once and held once; a node
    whose recorded facts, probes, evidence and origins are all those of a node read before shares that node's
    snapshot and is judged with it (evaluate_fleet), so a fleet of a few kinds of node holds a few snapshots however
    many nodes it has, and a fleet of nodes that differ holds what each has of its own."""
    first: Dict[str, Snapshot] = {}
    groups: Dict[Tuple[str, str], dict] = {}
    nodes = []
    for path in paths:
        data = read_document(path)
        shared = _share_groups(data, groups)
        if shared is None:
            nodes.append(from_json(data, path))
            continue
        digest, fitting = shared
        known = first.get(digest)
        if known is None:
            snapshot = from_json(data, path, fitting)
            snapshot.source["digest"] = digest
            first[digest] = snapshot
        else:
            snapshot = replace(known, facts=data["facts"], source={**known.source, "paths": [path]})
        nodes.append(snapshot)
    return nodes


def _share_groups(data, groups: Dict[Tuple[str, str], dict]) -> Optional[Tuple[str, List[str]]]:
    """Put in a snapshot document's facts, for each group that `groups` (by name and repr, which tells 1, 1.0 and
    true apart and keeps key order) holds already, the group held there, and add the others to it; a host group
    is compared with its name left out and keeps its own name. (A digest of what the rules read of the document,
    its host name aside; the groups held already), or None for a document that is not a snapshot (from_json says
    what is wrong with it) or whose host name is not a string."""
    facts = data.get("facts") if isinstance(data, dict) else None
    host = facts.get("host") if isinstance(facts, dict) else None
    if not isinstance(facts, dict) or not isinstance(host, dict) or not isinstance(host.get("hostname"), str):
        return None
    source = data.get("source")
    texts = [repr([data.get(key) for key in ("schema", "probes", "evidence", "conflicts", "origins")]
                  + [source.get("kind") if isinstance(source, dict) else None])]
    fitting = []
    for name, value in facts.items():
        text = repr({**value, "hostname": None} if name == "host" else value)
        texts.append(f"{name!r}: {text}")
        held = groups.setdefault((name, text), value)
        if held is not value:
            fitting.append(name)
            facts[name] = {**held, "hostname": host["hostname"]} if name == "host" else held
    digest = hashlib.blake2b("\n".join(texts).encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    return digest, fitting


def _hostname(snapshot: Snapshot) -> Optional[str]:
    """The host a snapshot describes: the recorded hostname, else the one host its logs name."""
    from gpudoctor.ingest.log_hosts import named_hosts

    recorded = (snapshot.facts.get("host") or {}).get("hostname")
    logs = snapshot.facts.get("logs")
    in_logs = named_hosts(logs) if isinstance(logs, dict) else []
    return recorded or (in_logs[0] if len(in_logs) == 1 else None)


def file_node_names(snapshots: Sequence[Snapshot], paths: Sequence[str]) -> List[str]:
    """Names for snapshot files: the recorded hostnames (or the one host a log snapshot names) when every file
    has one and they are all different, otherwise the file names (the paths as given where two share a name)."""
    hosts = [_hostname(snapshot) for snapshot in snapshots]
    named = [h for h in hosts if isinstance(h, str) and h]
    if len(named) == len(hosts) and len(set(named)) == len(named):
        return named
    names = [Path(path).name for path in paths]
    return names if len(set(names)) == len(names) else list(paths)


def log_nodes(name: str, snapshot: Snapshot) -> List[Tuple[str, Snapshot]]:
    """A snapshot whose logs name several hosts (`snapshot --from LOG` of a multi-node run) as one node per host
    (gpudoctor.ingest.log_hosts.split_by_host); the snapshot's other facts go to the host it was recorded on. What no
    host claims (a traceback without a prefix in an interleaved log) is a node of its own, `NAME (no host)`,
    reported but not compared with the hosts. Any other snapshot is one node."""
    from gpudoctor.ingest.log_hosts import named_hosts, split_by_host

    logs = snapshot.facts.get("logs")
    if not isinstance(logs, dict) or len(named_hosts(logs)) < 2:
        return [(name, snapshot)]
    parts, rest = split_by_host(logs)
    others = {group: value for group, value in snapshot.facts.items() if group != "logs"}
    home = (snapshot.facts.get("host") or {}).get("hostname")
    home = home if home in parts else None

    def node(facts: dict, **source) -> Snapshot:
        return Snapshot(facts=facts, source={**snapshot.source, **source}, evidence=dict(snapshot.evidence),
                        origins=dict(snapshot.origins))

    nodes = [(host, node({**(others if host == home else {}), "logs": part}, host=host))
             for host, part in parts.items()]
    left = others if home is None else {}
    if rest is not None or left:
        nodes.append((f"{name} (no host)", node({**left, **({"logs": rest} if rest else {})},
                                                compared=bool(left))))
    return nodes


def fleet_nodes(snapshots: Sequence[Snapshot], paths: Sequence[str]) -> List[Tuple[str, Snapshot]]:
    """The nodes of `gpudoctor fleet FILE...`: one per file, or one per host of a multi-host log snapshot; a
    host named by two files is told apart by its file."""
    named = [(path, node) for path, name, snapshot in zip(paths, file_node_names(snapshots, paths), snapshots)
             for node in log_nodes(name, snapshot)]
    counted = Counter(name for _, (name, _) in named)
    return [(f"{Path(path).name}:{name}" if counted[name] > 1 else name, snapshot)
            for path, (name, snapshot) in named]


# ---- check --fleet: gather the ranks' snapshots on rank 0 -------------------------------------------------------

def node_name(snapshot: Snapshot, rank: int) -> str:
    host = (snapshot.facts.get("host") or {}).get("hostname") or socket.gethostname()
    return f"{host}:{rank}"


def gloo_interface(environ, interfaces: Optional[list]) -> Optional[str]:
    """The one interface gloo should use when GLOO_SOCKET_IFNAME is unset but NCCL_SOCKET_IFNAME is set: the first
    (by name, loopback last) that is up, has an IPv4 address and matches NCCL_SOCKET_IFNAME's syntax (prefixes, `^`
    to exclude, `=` for exact names). None when gloo keeps its own choice (nothing to resolve, or nothing matches)."""
    from gpudoctor.facts.nccl_values import nccl_ifname_matches

    value = environ.get("NCCL_SOCKET_IFNAME") or ""
    if environ.get("GLOO_SOCKET_IFNAME") or len(value) <= 1 or not interfaces:
        return None
    usable = sorted((item.get("name", "") for item in interfaces
                     if item.get("up") is not False and any(":" not in a for a in item.get("addresses") or [])),
                    key=lambda name: (name.startswith("lo"), name))  # loopback only when nothing else matches
    chosen = nccl_ifname_matches(value, usable)
    return chosen[0] if chosen else None


def snapshots_from_payloads(payloads: list) -> List[Tuple[str, Snapshot]]:
    """The gathered `{"node": str, "snapshot": {...}}` documents as snapshots (a malformed one: FleetError)."""
    nodes = []
    for rank, item in enumerate(payloads):
        if not (isinstance(item, dict) and isinstance(item.get("node"), str)
                and isinstance(item.get("snapshot"), dict)):
            raise FleetError(f"check --fleet: rank {rank} sent something that is not a gpudoctor snapshot")
        try:
            snapshot = from_json(item["snapshot"], item["node"])
        except SnapshotError as exc:
            raise FleetError(f"check --fleet: rank {rank}: {exc}") from None
        snapshot.source = {"kind": "live", "paths": [], "node": item["node"]}
        nodes.append((item["node"], snapshot))
    return nodes
