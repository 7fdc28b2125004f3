"""GD403, GD407: the network NCCL and gloo are told to use against this host's: `NCCL_SOCKET_IFNAME` /
`GLOO_SOCKET_IFNAME` against its interfaces (`host.interfaces`), `NCCL_IB_DISABLE` against its InfiniBand/RoCE
devices (`host.ib_devices`). Knowledge: rules/nccl_env.toml."""

from __future__ import annotations

from typing import List, Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.nccl_settings import location_of, value_of
from gpudoctor.facts.nccl_values import c_strtoll, nccl_ifname_matches
from gpudoctor.model import EnvChange

# --- GD403 nccl-socket-ifname-missing ----------------------------------------------------------------------

def _usable(interface: dict, family: Optional[str]) -> bool:
    if interface.get("up") is False:
        return False
    addresses = interface.get("addresses")
    if addresses is None:
        return True
    if family == "AF_INET":
        addresses = [a for a in addresses if ":" not in a]
    elif family == "AF_INET6":
        addresses = [a for a in addresses if ":" in a and not a.startswith("::1")]
    return bool(addresses)


def _describe(interfaces: List[dict]) -> str:
    parts = []
    for item in interfaces[:12]:
        state = "down" if item.get("up") is False else "up"
        addresses = item.get("addresses") or []
        parts.append(f"{item.get('name')} ({state}{', ' + addresses[0] if addresses else ', no address'})")
    return ", ".join(parts) + (" …" if len(interfaces) > 12 else "")


def _for_other_nodes(facts, source: dict) -> bool:
    """Whether a variable was set in a batch script or a Kubernetes manifest: a job file for other machines."""
    path = source.get("path")
    launch = facts.get("launch", None) or {}
    return path is not None and (
        any(job.get("path") == path and job.get("kind") in ("sbatch", "k8s") for job in launch.get("jobs") or ())
        or any(pod.get("path") == path for pod in launch.get("pods") or ()))


@check("GD403")
def nccl_socket_ifname_missing(facts, rule):
    env = facts.get("env")
    wanted = [name for name in IFNAME_PROBLEMS if env.get(name)]
    if not wanted:
        return []
    interfaces = facts.get("host.interfaces")
    if not interfaces:
        return []  # no interface list (not probed on this OS): nothing to judge
    sources = facts.get("env_sources", {}) or {}
    family = env.get("NCCL_SOCKET_FAMILY")
    usable_names = [i.get("name", "") for i in interfaces
                    if _usable(i, family if family in ("AF_INET", "AF_INET6") else None)]
    candidates = [n for n in usable_names if not n.startswith(("lo", "docker", "virbr", "veth"))]
    findings = []
    for name in _set_for_this_host(facts, wanted, sources):
        value = str(env[name])
        message = IFNAME_PROBLEMS[name](value, interfaces, usable_names, family)
        if message is not None:
            findings.append(rule.finding(message, location=location_of(sources.get(name) or {}), evidence={
                "variable": name, "value": value, "interfaces": [i.get("name") for i in interfaces],
                "usable": usable_names}, fix=_interface_fix(rule, name, candidates)))
    return findings


def _set_for_this_host(facts, wanted: List[str], sources: dict) -> List[str]:
    """The variables to judge against this host's interfaces: not those a job file sets for other nodes (when
    every one is, their interfaces are not known here: MissingFact)."""
    elsewhere = [name for name in wanted if _for_other_nodes(facts, sources.get(name) or {})]
    if elsewhere and elsewhere == wanted:
        where = (sources.get(wanted[0]) or {}).get("path")
        raise MissingFact("host.interfaces", f"{', '.join(wanted)} set in {where}, a job file for the nodes the job "
                                             f"runs on: their interfaces are not known here")
    return [name for name in wanted if name not in elsewhere]


def _nccl_ifname_problem(value: str, interfaces: List[dict], usable_names: List[str], family) -> Optional[str]:
    if len(value) <= 1 or nccl_ifname_matches(value, usable_names):
        return None  # one character: NCCL ignores it (GD402 says so)
    near = nccl_ifname_matches(value, [i.get("name", "") for i in interfaces])
    why = f" ({', '.join(near)} matches but is down or has no {family or 'IP'} address)" if near else ""
    return (f"NCCL_SOCKET_IFNAME={value} matches no usable interface on this host{why}; NCCL fails with "
            f"\"no socket interface found\" (interfaces: {_describe(interfaces)})")


def _gloo_ifname_problem(value: str, interfaces: List[dict], usable_names: List[str], family) -> Optional[str]:
    missing = [n for n in value.split(",") if n and n not in usable_names]
    if not missing:
        return None
    return (f"GLOO_SOCKET_IFNAME={value}: {', '.join(missing)} is not a usable interface on this host; "
            f"gloo fails with \"Unable to find address for\" (interfaces: {_describe(interfaces)})")


# the interface variables GD403 judges, each with what is wrong in its value (None: nothing)
IFNAME_PROBLEMS = {"NCCL_SOCKET_IFNAME": _nccl_ifname_problem, "GLOO_SOCKET_IFNAME": _gloo_ifname_problem}


def _interface_fix(rule, name: str, candidates: List[str]):
    """The one usable interface where there is one; else unset, naming the candidates."""
    if len(candidates) == 1:  # NCCL's `=name` is its exact-match form (the fix text says so)
        if name == "NCCL_SOCKET_IFNAME":
            return rule.fix(applicability="unsafe", case="only_interface_exact", values={"interface": candidates[0]},
                            env=EnvChange(set={name: f"={candidates[0]}"}))
        return rule.fix(applicability="unsafe", case="only_interface", values={"variable": name,
                                                                               "interface": candidates[0]},
                        env=EnvChange(set={name: candidates[0]}))
    return rule.fix(applicability="unsafe", case="pick_interface" if candidates else "no_interface",
                    values={"variable": name, **({"interfaces": ", ".join(candidates)} if candidates else {})},
                    env=EnvChange(unset=(name,)))

# --- GD407 nccl-ib-disabled -------------------------------------------------------------------------------

def _rdma_devices(devices: list) -> List[str]:
    found = []
    for device in devices or []:
        name = device.get("name", "")
        if name.startswith(("efa", "rdmap")):
            continue  # AWS EFA shows up in /sys/class/infiniband but is driven by the OFI plugin, not NCCL's IB
        ports = device.get("ports") or []
        if not ports:
            found.append(name)
            continue
        for port in ports:
            layer = (port.get("link_layer") or "").lower()
            state = (port.get("state") or "").upper()
            if layer in ("infiniband", "ethernet", "") and state in ("ACTIVE", ""):
                found.append(f"{name} ({port.get('link_layer') or '?'})")
                break
    return found


@check("GD407")
def nccl_ib_disabled(facts, rule):
    value = value_of(facts, "NCCL_IB_DISABLE")
    if value is None or not c_strtoll(value)[0]:
        return []
    devices = _rdma_devices(facts.get("host.ib_devices"))
    if not devices:
        return []
    location = location_of((facts.get("env_sources", {}) or {}).get("NCCL_IB_DISABLE") or {})
    return [rule.finding(
        f"NCCL_IB_DISABLE={value} while this host has active InfiniBand/RoCE devices ({', '.join(devices)}): NCCL "
        "sends inter-node traffic over TCP sockets instead (the NCCL_DEBUG=INFO log shows NET/Socket, not NET/IB)",
        location=location, evidence={"NCCL_IB_DISABLE": value, "devices": devices},
        fix=rule.fix(applicability="unsafe", env=EnvChange(unset=("NCCL_IB_DISABLE",))))]
