"""GD420-GD425: what only an NCCL log shows — the network and interfaces NCCL chose, plugins, versions per rank,
timeouts and runtime errors. Pure functions of `logs` facts (gpudoctor.ingest.logs); no log given: they pass.

Routine INFO lines are not failures: `NET/Socket` or loopback on one node, a missing `libnccl-net.so` where no
fast network was meant. GD420/GD421 need evidence that a fast network was meant, GD423 several hosts.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.log_evidence import cited, log_count, log_events

_FAST_ENV = re.compile(r"^(?:NCCL_IB_(?!DISABLE)\w+|FI_\w+|NCCL_NET_PLUGIN|NCCL_NET|NCCL_NET_GDR_LEVEL|"
                       r"NCCL_CROSS_NIC|NCCL_COLLNET_ENABLE|NCCL_GDRCOPY_ENABLE)$")
_UNSUITABLE = re.compile(r"^(?:lo|docker\d*|virbr\d*|veth\w*|br-\w+|cni\d*)$")


def _hosts(facts) -> Dict[str, dict]:
    """Per host of the log (and "file NAME" for NCCL lines of a file without a host prefix)."""
    hosts = facts.get("logs.hosts", None) or {}
    return {name: entry for name, entry in hosts.items() if isinstance(entry, dict)}


def _named_hosts(facts) -> Dict[str, dict]:
    return {name: entry for name, entry in _hosts(facts).items() if not name.startswith("file ")}


def _host_count(facts) -> int:
    """How many hosts the run's logs name (a fleet node split from a multi-host log keeps the run's count), or NCCL
    says the run has (`nNodes`)."""
    said = [entry.get("nodes_in_run") or 0 for entry in _named_hosts(facts).values()]
    return max(len(_named_hosts(facts)), int(facts.get("logs.hosts_in_run", None) or 0), *said)


def _shows_nccl(facts) -> bool:
    """Whether the log shows NCCL's setup (logs.shows): where it does not, the engine leaves the rule unknown."""
    return "nccl" in (facts.get("logs.shows", None) or [])


def _echoed(facts) -> Dict[str, dict]:
    return facts.get("logs.nccl_env", None) or {}


def _network(entry: dict) -> Optional[str]:
    """The network NCCL used on this host, as far as the lines say."""
    chosen = entry.get("network") or entry.get("channel_network")
    if chosen:
        return str(chosen).strip()
    if "ib_used" in entry:
        return "IB"
    if "plugin_loaded" in entry:
        return "plugin"
    if "socket_listed" in entry and ({"ib_no_device", "ibverbs_missing", "plugin_failed"} & set(entry)):
        return "Socket"
    return None


def _fast_network_meant(facts, hosts: Dict[str, dict]) -> List[str]:
    """Why a fast network was meant: settings, devices, or a plugin that was tried."""
    reasons = []
    settings = sorted(name for name in _echoed(facts) if _FAST_ENV.match(name))
    settings += sorted(name for name in (facts.get("env", None) or {}) if _FAST_ENV.match(name)
                       and name not in settings)
    if settings:
        reasons.append(f"{', '.join(settings[:3])} set")
    devices = facts.get("host.ib_devices", None)
    if devices:
        reasons.append(f"{len(devices)} InfiniBand/RDMA device(s) on the host")
    if any(_network(e) == "IB" for e in hosts.values()):
        reasons.append("other ranks used IB")
    if any("plugin_failed" in e for e in hosts.values()):
        reasons.append("a net plugin was installed and tried")
    return reasons


def _ib_disabled(facts) -> bool:
    value = (_echoed(facts).get("NCCL_IB_DISABLE") or {}).get("value") or (facts.get("env", None) or {}).get(
        "NCCL_IB_DISABLE")
    return str(value).strip().rstrip(".") == "1"


@check("GD420")
def nccl_socket_fallback(facts, rule):
    hosts = _hosts(facts)
    fell_back = {name: e for name, e in hosts.items() if (_network(e) or "").lower() == "socket"}
    if not fell_back or _ib_disabled(facts):
        return  # GD407 judges NCCL_IB_DISABLE=1
    if _host_count(facts) < 2 and not any("channel_network" in e for e in fell_back.values()):
        return  # one node: its channels go over P2P/SHM, the network NCCL picked carries nothing
    meant = _fast_network_meant(facts, hosts)
    stated = facts.get("host.ib_devices", None) is not None or all("ib_no_device" in e for e in fell_back.values())
    if not meant and not stated:  # NCCL's `NET/IB : No device found` states it
        raise MissingFact("host.ib_devices", "the log shows NCCL on sockets, not whether the hosts have an "
                                             "InfiniBand/RDMA network it should have used (`ibv_devices` lists it)")
    if not meant:
        return  # an Ethernet-only cluster: sockets are what there is
    name, entry = next(iter(fell_back.items()))
    why = _why_sockets(entry)
    at = entry.get("network_at") or entry.get("channel_network_at") or entry.get("socket_listed") or {}
    others = f" and {len(fell_back) - 1} other host(s)" if len(fell_back) > 1 else ""
    yield rule.finding(
        f"NCCL used TCP sockets (NET/Socket) on {name}{others} although a fast network was meant "
        f"({'; '.join(meant)}): " + ("; ".join(why) if why else "the log does not say why IB/EFA was not used"),
        evidence={"hosts": sorted(fell_back), "meant": meant, "log": at.get("where"), "line": at.get("line")},
        fix=rule.fix())


def _why_sockets(entry: dict) -> List[str]:
    """What a host's log says kept NCCL off IB/EFA: a failed net plugin, no libibverbs, no IB device."""
    return [f"{text} ({entry[key]['where']}: '{entry[key]['line']}')"
            for key, text in (("plugin_failed", "the net plugin failed"), ("ibverbs_missing", "libibverbs is missing"),
                              ("ib_no_device", "NCCL found no IB device")) if key in entry]


@check("GD421")
def nccl_net_plugin_failed(facts, rule):
    hosts = _hosts(facts)
    failed = {n: e["plugin_failed"] for n, e in hosts.items() if "plugin_failed" in e}
    if not failed:
        wanted = _echoed(facts).get("NCCL_NET_PLUGIN") or {}
        plugin = str(wanted.get("value") or (facts.get("env", None) or {}).get("NCCL_NET_PLUGIN") or "")
        if plugin and plugin.lower() != "none":
            failed = {n: e.get("plugin_not_found") or e.get("plugin_symbol_missing") for n, e in hosts.items()
                      if "plugin_loaded" not in e and ("plugin_not_found" in e or "plugin_symbol_missing" in e)}
    if not failed:
        return
    name, at = next(iter(failed.items()))
    yield rule.finding(
        f"the NCCL net plugin was not found or failed to initialise on {name}"
        f"{f' and {len(failed) - 1} other host(s)' if len(failed) > 1 else ''}: '{at['line']}' "
        "— NCCL then uses its internal IB or socket transport",
        evidence={"hosts": sorted(failed), "log": at["where"], "line": at["line"]},
        fix=rule.fix())


@check("GD422")
def nccl_version_mismatch(facts, rule):
    hosts = _hosts(facts)
    versions = {name: e["nccl_version"] for name, e in hosts.items() if e.get("nccl_version")}
    if len(set(versions.values())) < 2:
        if _shows_nccl(facts) and len(versions) < max(len(hosts), 1):  # else the engine says what the log lacks
            raise MissingFact("logs.hosts.nccl_version", "the log does not show every host's NCCL version (`NCCL "
                                                         "version …`, which NCCL prints on rank 0)")
        return
    by_version: Dict[str, List[str]] = {}
    for name, found in versions.items():
        by_version.setdefault(found, []).append(name)
    listing = "; ".join(f"{v} on {', '.join(sorted(names)[:3])}" for v, names in sorted(by_version.items()))
    yield rule.finding(
        f"ranks run different NCCL versions ({listing}): collectives can hang or fail between them",
        evidence={"versions": versions},
        fix=rule.fix())


def _interfaces(entry: dict) -> tuple:
    """(the interfaces that carry this host's traffic, where the log says so): bootstrap/out-of-band, plus the
    socket transport's when sockets are the network (with IB, the socket list carries nothing)."""
    names = list(entry.get("interfaces", []))
    at = entry.get("interfaces_at", {})
    if (_network(entry) or "").lower() == "socket" or not names:
        names += [i for i in entry.get("socket_interfaces", []) if i not in names]
        at = at or entry.get("socket_interfaces_at", {})
    return names, at


_NO_INTERFACE = ("the log does not show which network interface NCCL used on each host (`NCCL INFO Bootstrap : Using "
                 "eth0…`, `NET/Socket : Using …`)")
_ONE_HOST = ("the log shows one host, not whether the run had others (NCCL's `comm … nNodes N` line, or its channels "
             "`via P2P/…`, `via SHM/…`, `via NET/…`)")


def _several_nodes(named: Dict[str, dict], hosts: int, shows_nccl: bool) -> bool:
    """Whether the run spans several nodes: the log names several hosts, NCCL says so (`nNodes`), or a channel
    crosses the network (`via NET/…`); False for a run shown to be on one node (or a log without NCCL's setup);
    MissingFact for one host's log that shows neither."""
    if hosts >= 2 or any(entry.get("channel_network") for entry in named.values()):
        return True
    if _one_node_shown(named.values()) or not shows_nccl:
        return False
    raise MissingFact("logs.hosts.nodes_in_run", _ONE_HOST)  # a rank-0 log of a multi-node run shows one host


def _one_node_shown(entries) -> bool:
    """Whether the log shows a run of one node: NCCL says `nNodes 1`, or its channels reach the other ranks within
    the host (P2P, SHM) and none over the network."""
    if any(entry.get("nodes_in_run") == 1 for entry in entries):
        return True
    within = any(entry.get("p2p_at") or entry.get("shm_at") for entry in entries)
    return within and not any(entry.get("channel_network") for entry in entries)


@check("GD423")
def nccl_interface_unsuitable(facts, rule):
    named = _named_hosts(facts)
    hosts = _host_count(facts)
    used = {n: _interfaces(e) for n, e in named.items()}
    used = {n: pair for n, pair in used.items() if pair[0]}
    if not used and _shows_nccl(facts):  # else the engine says what the log lacks
        raise MissingFact("logs.hosts.interfaces", _NO_INTERFACE)
    if not _several_nodes(named, hosts, _shows_nccl(facts)):
        return  # one node: loopback and docker0 are fine (without NCCL's setup the engine says what is lacking)
    bad = {n: [i for i in names if _UNSUITABLE.match(i)] for n, (names, _) in used.items()}
    bad = {n: found for n, found in bad.items() if found}
    first = {n: names[0] for n, (names, _) in used.items()}
    if bad:
        name, found = next(iter(bad.items()))
        across = f"across {hosts} hosts" if hosts >= 2 else "whose channels cross the network (`via NET/…`)"
        message = (f"NCCL uses {', '.join(found)} on {name} in a job {across}: a loopback "
                   "or container bridge does not reach the other nodes")
    elif len(set(first.values())) > 1:
        name = sorted(first)[0]
        message = ("ranks picked different socket interfaces ("
                   + ", ".join(f"{i} on {n}" for n, i in sorted(first.items())[:4]) + "): NCCL chooses per host, "
                   "so the ranks may be on different networks")
    elif len(used) < len(named):
        raise MissingFact("logs.hosts.interfaces", _NO_INTERFACE)  # a host whose interface the log does not show
    else:
        return
    at = used[name][1]
    yield rule.finding(
        message, evidence={"interfaces": {n: names for n, (names, _) in used.items()}, "log": at.get("where"),
                           "line": at.get("line")},
        fix=rule.fix())


@check("GD424")
def collective_timeout(facts, rule):
    timeouts = log_events(facts, "watchdog_timeout")
    if not timeouts:
        return
    first = timeouts[0]
    ranks = sorted({e["rank"] for e in timeouts if e.get("rank") is not None})
    hints = []
    prep = log_events(facts, "preprocessing")
    if prep:
        hints.append(f"the log shows dataset preprocessing running ({prep[0]['where']}): a rank busy "
                     "tokenizing while the others wait in a collective")
    if log_events(facts, "sigkill", "oom_killer", "cuda_oom", "xid"):
        hints.append("the log also shows a rank killed or a GPU error (see the other findings): a dead rank "
                     "leaves the others waiting")
    if not hints:
        hints.append("look for the rank that did not reach the collective: stuck in data loading or I/O, died "
                     "(its own log), or on a network NCCL fell back from")
    timeout_s = first.get("timeout_ms", 0) / 1000
    lines = log_count(facts, "watchdog_timeout")
    yield rule.finding(
        f"collective {first.get('op')} (sequence {first.get('seq')}) timed out after {timeout_s:.0f} s on "
        f"rank(s) {', '.join(map(str, ranks)) or '?'}{f' ({lines} timeout lines)' if lines > 1 else ''}; "
        + "; ".join(hints),
        evidence={**cited(first), "ranks": ranks, "op": first.get("op"), "seq": first.get("seq"),
                  "timeout_ms": first.get("timeout_ms")},
        fix=rule.fix())


_RUNTIME = {  # event kind → what it means; the fix is the catalog's case of the same name
    "duplicate_gpu": "two ranks use the same GPU (NCCL 'invalid usage')",
    "fabric_manager": ("NVSwitch/NVLS setup failed: on an NVSwitch system this means the fabric manager is not "
                       "running or its version differs from the driver's"),
    "no_socket_interface": "NCCL found no usable network interface for its bootstrap",
}

_LINK = "a link, cable or switch problem, or on RoCE a GID index or traffic class the fabric drops"
# ibv_wc_status → (what it means, its usual cause); 4 (IBV_WC_LOC_PROT_ERR) is GPUDirect RDMA broken by ACS on the PCIe
# switches, as NCCL's maintainers answer it (NVIDIA/nccl#928: NCCL_NET_GDR_LEVEL=0 confirms it)
_IB_STATUS = {
    12: ("the transport retry counter ran out: the peer did not acknowledge in time", _LINK),
    13: ("the receiver-not-ready retry counter ran out", _LINK),
    4: ("a local protection error: the NIC could not access the GPU memory it was given",
        "on PCIe systems, ACS on the switches between the NIC and the GPU breaking GPUDirect RDMA"),
    None: ("the work request failed", _LINK),
}


def _connect_failed(event: dict) -> str:
    peer = f" to {event['peer']}" if event.get("peer") else ""
    host = f" on {event['host']}" if event.get("host") else ""
    return (f"NCCL{host} could not open a connection{peer} ({event.get('reason') or 'connect failed'}): a firewall "
            "or security group between the nodes, or an address on an interface the other node cannot reach")


def _own_events(facts, kind: str, rule_id: str) -> list:
    """The log's events of this kind that NCCL's lines gave, or an atlas message that names this rule: not a message
    of another program that another rule reports (the fabric manager's own log is GD105's)."""
    return [event for event in log_events(facts, kind) if event.get("rule") in (None, rule_id)]


@check("GD425")
def nccl_runtime_error(facts, rule):
    explained = False
    for kind, what in _RUNTIME.items():
        for event in _own_events(facts, kind, rule.id)[:1]:
            explained = True
            yield rule.finding(f"{what}: {event['line']}", evidence=cited(event), fix=rule.fix(
                case=kind if kind in ("duplicate_gpu", "fabric_manager", "no_socket_interface") else "nccl_error"))
    for event in log_events(facts, "connect_failed")[:1]:
        explained = True
        yield rule.finding(f"{_connect_failed(event)}: {event['line']}",
                           evidence={**cited(event), "peer": event.get("peer"), "reason": event.get("reason")},
                           fix=rule.fix(case="connect_failed"))
    for event in log_events(facts, "ib_completion_error")[:1]:
        explained = True
        yield _ib_completion_error(rule, event, log_count(facts, "ib_completion_error"))
    nccl_oom = [e for e in log_events(facts, "cuda_oom") if e.get("source") == "nccl"]
    if explained or nccl_oom or log_events(facts, "ibv_reg_mr"):
        return  # torch's 'NCCL error … unhandled …' after it is the same failure (GD508, GD505 name the others)
    if log_events(facts, "nccl_warn") or any(e.get("rule") not in (None, rule.id) and "NCCL WARN" in str(e.get("line"))
                                             for e in log_events(facts)):
        return  # a WARN of the atlas states the cause: the engine reports it under its rule (log_evidence)
    for event in log_events(facts, "nccl_error")[:1]:
        yield _nccl_error(rule, event)


def _ib_completion_error(rule, event: dict, times: int):
    """An InfiniBand work completion with an error status: what the status means and its usual cause."""
    status = event.get("status")
    meaning, cause = _IB_STATUS.get(status, _IB_STATUS[None])
    peer = f" with {event['peer']}" if event.get("peer") else ""
    return rule.finding(
        f"InfiniBand returned completion error {status}{peer} ({meaning}){f', {times} times' if times > 1 else ''}"
        f": {cause}: {event['line']}",
        evidence={**cited(event), "status": status, "peer": event.get("peer")},
        fix=rule.fix(case="ib_protection_error" if status == 4 else "ib_completion_error"))


def _nccl_error(rule, event: dict):
    """torch's 'NCCL error' with nothing above it that explains it: the reason NCCL gave, or a remote rank's exit."""
    error = event.get("error") or "NCCL error"
    reason = event.get("reason")
    if "remote process exited" in error:
        what = ("another rank exited or lost its connection first: this rank's error is a consequence — look "
                "for the first error in all ranks' logs")
    else:
        what = f"NCCL failed with '{error}'" + (f"; the NCCL warning before it: '{reason}'" if reason else
                                                " (run with NCCL_DEBUG=WARN to see the reason NCCL gives)")
    return rule.finding(f"{what}: {event['line']}", evidence={**cited(event), "reason": reason},
                        fix=rule.fix(case="nccl_error"))
