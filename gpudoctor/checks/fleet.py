"""GD8xx: the fleet — the same job's nodes (or ranks) compared with one another.

Facts: `fleet.nodes` is a list of `{"node": "host-a:0", "facts": {…that node's snapshot facts…},
"failed_rules": ["GD503"], "passed_rules": ["GD101", …]}` (gpudoctor.fleet builds it from snapshots gathered by
`check --fleet` or given to `gpudoctor fleet`). Outside a fleet run the group is absent and the rules pass silently.
Each finding carries `evidence["nodes"]`: `{value: [node, …]}`, the largest group first.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable, Dict, List, Tuple

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.knowledge import Release, version
from gpudoctor.model import Severity

_ABSENT = object()
_NOT_APPLICABLE = object()  # the fact has no meaning on this node: neither a value nor unknown
SHOWN = 4  # node names spelled out per group in a message; the evidence has them all
UNSET = "(unset)"
# Variables whose value differs per rank by design.
PER_RANK = {"CUDA_VISIBLE_DEVICES"}
# Variables that change only what is logged (NCCL's environment-variable reference; torch's c10 logging level):
# a difference between ranks is worth an info line, never a hang-causing error.
LOGGING_ONLY = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE", "NCCL_DEBUG_TIMESTAMP_FORMAT",
                "NCCL_DEBUG_TIMESTAMP_LEVELS", "TORCH_CPP_LOG_LEVEL"}
ENV_PREFIXES = ("NCCL_", "TORCH_NCCL_", "CUDA_", "FI_", "UCX_")


def _get(data, path: str):
    node = data
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return _ABSENT
    return node


def _nodes(facts) -> list:
    nodes = facts.get("fleet.nodes", None)  # not a fleet run: nothing to compare
    return nodes if isinstance(nodes, list) and len(nodes) >= 2 else []


def _group(nodes: list, value_of: Callable) -> Tuple[Dict[str, list], list]:
    """({value: [node, …]} largest group first, [nodes where the value is unknown])."""
    groups: Dict[str, list] = {}
    unknown = []
    for node in nodes:
        value = value_of(node.get("facts") or {})
        if value is _NOT_APPLICABLE:
            continue
        if value is _ABSENT:
            unknown.append(node["node"])
        else:
            groups.setdefault(str(value), []).append(node["node"])
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return dict(ordered), unknown


def _names(nodes: list) -> str:
    shown = ", ".join(nodes[:SHOWN])
    return shown + (f" and {len(nodes) - SHOWN} more" if len(nodes) > SHOWN else "")


def _spread(groups: Dict[str, list]) -> str:
    """`550.90.07 on host-a:0, host-b:0; 535.104.05 on host-c:0`."""
    return "; ".join(f"{value} on {_names(nodes)}" for value, nodes in groups.items())


def _evidence(fact: str, groups: dict, unknown: list) -> dict:
    evidence = {"fact": fact, "nodes": groups}
    if unknown:
        evidence["unknown"] = unknown
    return evidence


def _unless_all_known(unknown: list, fact: str) -> None:
    """No difference found: a pass only if every node told its value (a node that could not tell makes the
    comparison unknown, never passed)."""
    if unknown:
        raise MissingFact(fact)


def _fact(path: str) -> Callable:
    def value_of(facts):
        value = _get(facts, path)
        return "none" if value is None else value

    return value_of


def _version_key(text: str) -> Release:
    """`550.90.07` as a version ("none" and the unreadable oldest)."""
    return version(text) or Release("0")


@check("GD801")
def fleet_driver_mismatch(facts, rule):
    nodes = _nodes(facts)
    groups, unknown = _group(nodes, _fact("nvml.driver_version"))
    if len(groups) < 2:
        _unless_all_known(unknown, "nvml.driver_version")
        return
    newest = max(groups, key=_version_key)
    yield rule.finding(
        f"the NVIDIA driver differs between nodes: {_spread(groups)}. Ranks on different drivers support different "
        "CUDA versions and NCCL features: the job fails or hangs on the odd nodes",
        evidence=_evidence("nvml.driver_version", groups, unknown),
        fix=rule.fix(values={"newest": newest, "count": len(groups[newest]),
                             "total": sum(len(names) for names in groups.values())},
                     commands=("nvidia-smi --query-gpu=driver_version --format=csv,noheader",)))


STACK = (
    ("torch.version", "torch"),
    ("torch.cuda", "torch's CUDA runtime"),
    ("torch.cudnn", "cuDNN"),
    ("torch.nccl", "NCCL"),
)


def _stack_value(path: str) -> Callable:
    """A stack component of a node: its value where torch was probed, "not installed" for torch's version where
    it is missing (its other components do not apply), unknown where the torch probe did not succeed."""
    def value_of(facts):
        status = _get(facts, "torch.status")
        if status == "missing":
            return "not installed" if path == "torch.version" else _NOT_APPLICABLE
        if status not in ("ok", _ABSENT):  # the probe failed: nothing is known
            return _ABSENT
        value = _get(facts, path)
        return "none" if value is None else value

    return value_of


def _logged_nccl(facts):
    """The NCCL version a node's log printed (`snapshot --from LOG`); not applicable where it printed none (NCCL
    prints it on rank 0 only) or its log holds several hosts' versions (GD422 compares those)."""
    hosts = _get(facts, "logs.hosts")
    versions = {entry.get("nccl_version") for entry in hosts.values() if isinstance(entry, dict)
                and entry.get("nccl_version")} if isinstance(hosts, dict) else set()
    return versions.pop() if len(versions) == 1 else _NOT_APPLICABLE


@check("GD802")
def fleet_stack_mismatch(facts, rule):
    nodes = _nodes(facts)
    blind, fired = set(), False
    compared = [(path, what, _stack_value(path)) for path, what in STACK]
    compared.append(("logs.hosts.nccl_version", "NCCL (as the nodes' logs print it)", _logged_nccl))
    for path, what, value_of in compared:
        groups, unknown = _group(nodes, value_of)
        blind.update(unknown)
        if len(groups) < 2:
            continue
        fired = True
        yield rule.finding(
            f"{what} differs between nodes: {_spread(groups)}. Ranks built on different stacks disagree on the "
            "collective protocol and kernels: the job hangs at the first collective or diverges",
            evidence=_evidence(path, groups, unknown),
            fix=rule.fix())
    if blind and not fired:  # no difference among the nodes that told, but some could not tell: not a pass
        raise MissingFact("torch.version")


def _compared_env(name: str) -> bool:
    return name.startswith(ENV_PREFIXES) and name not in PER_RANK or name in LOGGING_ONLY


@check("GD803")
def fleet_env_mismatch(facts, rule):
    nodes = _nodes(facts)
    known = [node for node in nodes if isinstance(_get(node.get("facts") or {}, "env"), dict)]
    if len(known) < 2:  # fewer than two nodes recorded their environment: nothing was compared
        _unless_all_known([node["node"] for node in nodes if node not in known], "env")
    names = sorted({name for node in known for name in node["facts"]["env"] if _compared_env(name)})
    for name in names:
        groups, unknown = _group(nodes, lambda f, name=name: (
            _ABSENT if not isinstance(f.get("env"), dict) else f["env"].get(name, UNSET)))
        if len(groups) < 2:
            continue
        evidence = {**_evidence(f"env.{name}", groups, unknown), "variable": name}
        if name in LOGGING_ONLY:
            yield rule.finding(
                f"{name} differs between ranks: {_spread(groups)}. It only changes what is logged, not how the "
                "ranks communicate, but the logs of a failure will not be comparable across ranks",
                evidence=evidence, severity=Severity.INFO,
                fix=rule.fix(case="logging_only", values={"variable": name}))
            continue
        yield rule.finding(
            f"{name} differs between ranks: {_spread(groups)}. NCCL ranks that disagree on a setting pick "
            "different transports or algorithms and hang at the first collective (or fail much later)",
            evidence=evidence,
            fix=rule.fix(values={"variable": name}))


def _gpus(facts):
    """`8 × NVIDIA H100 80GB HBM3`, `4 × A + 4 × B`, `no GPU`; NVML's list, else torch's devices."""
    gpus = _get(facts, "nvml.gpus")
    if not isinstance(gpus, list) or (not gpus and _get(facts, "nvml.status") not in ("ok", "unavailable")):
        gpus = _get(facts, "torch.devices")
        if not isinstance(gpus, list) or (not gpus and _get(facts, "torch.status") != "ok"):
            return _ABSENT
    if not gpus:
        return "no GPU"
    counted = Counter(str(gpu.get("name", "GPU")) for gpu in gpus if isinstance(gpu, dict))
    return " + ".join(f"{count} × {name}" for name, count in sorted(counted.items()))


@check("GD804")
def fleet_gpu_mismatch(facts, rule):
    nodes = _nodes(facts)
    groups, unknown = _group(nodes, _gpus)
    if len(groups) < 2:
        _unless_all_known(unknown, "nvml.gpus")
        return
    yield rule.finding(
        f"GPUs differ between nodes: {_spread(groups)}. A missing GPU breaks the job's world size and rank layout; "
        "mixed models make every step as slow as the slowest and can change numerics",
        evidence=_evidence("nvml.gpus", groups, unknown),
        fix=rule.fix(commands=("nvidia-smi -L",)))


def _nodes_where(nodes: list, verdicts: str, rule_id: str) -> List[str]:
    """The nodes whose own report lists the rule among its `verdicts` (failed_rules, passed_rules)."""
    return [node["node"] for node in nodes if rule_id in (node.get(verdicts) or [])]


@check("GD805")
def fleet_odd_one_out(facts, rule):
    nodes = _nodes(facts)
    failed: List[str] = sorted({rule_id for node in nodes for rule_id in node.get("failed_rules") or []
                                if not rule_id.startswith("GD8")})
    for rule_id in failed:
        fails, passes = _nodes_where(nodes, "failed_rules", rule_id), _nodes_where(nodes, "passed_rules", rule_id)
        if not fails or not passes:
            continue  # on every node, or the others could not tell: nothing odd
        told = set(fails) | set(passes)
        unknown = [node["node"] for node in nodes if node["node"] not in told]
        named = {"rule": rule_id, "nodes": _names(fails)}
        others = "the other node" if len(passes) == 1 else f"the {len(passes)} other nodes"
        yield rule.finding(
            f"{rule_id} fails on {_names(fails)} but passes on {others}: "
            f"{'that node differs' if len(fails) == 1 else 'those nodes differ'} from the rest of the fleet "
            "(see its own report)",
            evidence={"rule": rule_id, "nodes": {"fails": fails, "passes": passes},
                      **({"unknown": unknown} if unknown else {})},
            fix=rule.fix(case="one_node", values=named) if len(fails) == 1 else rule.fix(values=named))
