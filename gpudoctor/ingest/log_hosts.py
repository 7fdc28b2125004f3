"""A run's `logs` facts (gpudoctor.ingest.logs) per host: which hosts the lines name, and the facts split by host
(`check --fleet` and a fleet of snapshots report per node). The facts may come from a recorded snapshot, which is
user input: a value of the wrong type counts as absent."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple


def _object(value: Any) -> Dict[str, Any]:
    """A recorded value that should be an object (anything else counts as empty)."""
    return value if isinstance(value, dict) else {}


def _items(value: Any, kind: type) -> List[Any]:
    """The entries of type `kind` of a recorded value that should be a list."""
    return [item for item in value if isinstance(item, kind)] if isinstance(value, list) else []


def _count(value: Any) -> int:
    return value if isinstance(value, int) else 0


def _host_of(record: Dict[str, Any]) -> Optional[str]:
    return record.get("host") if isinstance(record.get("host"), str) else None


def named_hosts(logs: Dict[str, Any]) -> List[str]:
    """The hosts a run's `logs` facts name in line prefixes (not the `file NAME` stand-ins)."""
    return [name for name in _object(logs.get("hosts")) if not name.startswith("file ")]


def split_by_host(logs: Dict[str, Any]) -> Tuple[Dict[str, Dict[str, Any]], Optional[Dict[str, Any]]]:
    """A run's `logs` facts as one `logs` group per named host (its NCCL facts, the variables NCCL echoed there,
    the events placed on it), and the rest: what no host claims (None when nothing is left). Each part keeps the
    run's files, `hosts_in_run` and the parts of the run the logs show, so a rule that needs several hosts still
    knows the run had them."""
    events = _items(logs.get("events"), dict)
    hosts = _object(logs.get("hosts"))
    named = named_hosts(logs)
    shared = {"files": _items(logs.get("files"), str), "lines": _count(logs.get("lines")),
              "hosts_in_run": max(len(named), _count(logs.get("hosts_in_run"))),
              "shows": _items(logs.get("shows"), str)}
    parts = {}
    for host in named:
        entry = _object(hosts[host])
        env = {name: {**echo, "host": host} for name, echo in _object(entry.get("nccl_env")).items()
               if isinstance(echo, dict)}
        parts[host] = _part(shared, {host: entry}, [e for e in events if _host_of(e) == host], env)
    rest_hosts = {name: entry for name, entry in hosts.items() if name not in parts}
    rest_events = [e for e in events if _host_of(e) not in parts]
    rest_env = {name: echo for name, echo in _object(logs.get("nccl_env")).items()
                if isinstance(echo, dict) and _host_of(echo) not in parts}
    rest = _part(shared, rest_hosts, rest_events, rest_env) if rest_hosts or rest_events or rest_env else None
    return parts, rest


def _part(shared: Dict[str, Any], entries: Dict[str, Any], kept: List[Dict[str, Any]],
          env: Dict[str, Any]) -> Dict[str, Any]:
    """One host's (or the rest's) `logs` group: its hosts, events and echoed variables, with what the run shares."""
    counts: Dict[str, int] = {}
    for event in kept:
        kind = str(event.get("kind", ""))
        counts[kind] = counts.get(kind, 0) + 1
    return {"files": shared["files"], "lines": shared["lines"], "hosts": entries, "nccl_env": env, "events": kept,
            "counts": counts, "hosts_in_run": shared["hosts_in_run"], "shows": shared["shows"]}
