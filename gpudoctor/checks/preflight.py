"""GD806–GD809: `gpudoctor preflight` — the job's whole allocation tested together, each problem named.

Facts: the `preflight` group (rules/facts.toml), which gpudoctor.preflight builds from every rank's measurements:
`nodes` (who was expected and who arrived), `gpus` (each GPU's best timed matmul and copy), `fabric` (all-reduce
within nodes, across them and between pairs of nodes), `failure` (a collective that did not finish: null when
every one did). Outside a preflight the group is absent and the rules are not applicable. Each finding's evidence
names what is bad: `nodes` (node labels), `gpus` (`{node, rank, index, uuid}`) or `pairs` ([node, node]).
"""

from __future__ import annotations

from typing import Iterable, List, Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.knowledge import gpu_spec, table

SHOWN = 4


def _median(values) -> float:
    from statistics import median  # here: importing statistics costs every check's start a few milliseconds

    return median(values)


def _names(items: List[str]) -> str:
    shown = ", ".join(items[:SHOWN])
    return shown + (f" and {len(items) - SHOWN} more" if len(items) > SHOWN else "")


def _limits(facts) -> dict:
    """The fractions this run is judged by: those preflight recorded (rules/preflight.toml's, with a site
    policy's `[preflight]` over them), else rules/preflight.toml's."""
    return facts.get("preflight.limits", None) or table("preflight")


@check("GD806")
def preflight_node_missing(facts, rule):
    nodes = facts.get("preflight.nodes")
    missing = [node for node in nodes if sorted(node.get("arrived") or []) != sorted(node.get("ranks") or [])]
    if not missing:
        return
    arrived = sum(len(node.get("arrived") or []) for node in nodes)
    expected = sum(len(node.get("ranks") or []) for node in nodes)
    parts = []
    for node in missing:
        absent = sorted(set(node.get("ranks") or []) - set(node.get("arrived") or []))
        parts.append(f"{node['node']} (rank{'s' if len(absent) > 1 else ''} {', '.join(map(str, absent))})")
    labels = [node["node"] for node in missing]
    hosts = [node["host"] for node in missing if node.get("host")]
    seconds = facts.get("preflight.meet_timeout_s", None)
    within = f" within {seconds:g} s" if isinstance(seconds, (int, float)) else ""
    yield rule.finding(
        f"{len(missing)} node{'s' if len(missing) > 1 else ''} never reached the meeting point{within}: "
        f"{_names(parts)}; {arrived} of {expected} ranks arrived. Their processes are hung in start-up (a stuck "
        "file system, an import that waits), died, or cannot reach MASTER_ADDR",
        evidence={"nodes": labels, "hosts": hosts, "arrived": arrived, "expected": expected},
        fix=rule.fix(values={"nodes": _names(hosts or labels)}))


def _gpu_name(gpu: dict) -> str:
    where = gpu["node"] if gpu.get("index") is None else f"{gpu['node']} GPU {gpu['index']}"
    return f"{where} (rank {gpu['rank']})"


def _datasheet_floor(gpu: dict, fraction: float) -> Optional[float]:
    """The bf16 matmul TFLOP/s below which this GPU's model is throttled (rules/gpus.toml, rules/preflight.toml)."""
    if gpu.get("dtype") != "bfloat16" or not gpu.get("name"):
        return None
    spec = gpu_spec(gpu["name"]) or {}
    peak = spec.get("bf16_dense_tflops")
    return peak * fraction if isinstance(peak, (int, float)) else None


METRICS = (("gemm_tflops", "matmul", "TFLOP/s"), ("copy_gbps", "memory copy", "GB/s"))


@check("GD807")
def preflight_gpu_straggler(facts, rule):
    listed = [gpu for gpu in facts.get("preflight.gpus") if isinstance(gpu, dict)]
    limits = _limits(facts)
    fraction, datasheet = limits["straggler"]["below_median"], limits["gemm"]["datasheet_fraction"]
    judged = False
    for gpu in listed:
        if gpu.get("unfinished_s") is not None:
            judged = True
            yield rule.finding(
                f"{_gpu_name(gpu)} is a straggler: it was still timing its device when the phase's "
                f"{gpu['unfinished_s']:g} s ran out, far slower than the ranks that had finished. Every step of the "
                "job waits for its slowest GPU",
                evidence={"nodes": [gpu["node"]], "gpus": [_gpu_ref(gpu)], "metric": "unfinished",
                          "value": gpu["unfinished_s"]},
                fix=rule.fix(values={"node": gpu["node"]}))
    gpus = [gpu for gpu in listed if gpu.get("unfinished_s") is None]
    for metric in METRICS:
        figures = [gpu[metric[0]] for gpu in gpus if isinstance(gpu.get(metric[0]), (int, float))]
        if len(figures) < len(gpus) or not figures:
            continue  # a GPU that measured nothing: its figure is unknown, and so is the median it would move
        judged = True
        middle = _median(figures)
        for gpu in gpus:
            finding = _slow(rule, gpu, metric, middle, fraction * middle if len(gpus) >= 2 else None, datasheet)
            if finding is not None:
                yield finding
    if not judged:
        raise MissingFact("preflight.gpus", "no GPU finished its timed runs")


def _slow(rule, gpu: dict, metric: tuple, middle: float, slow_below: Optional[float], datasheet: float):
    """A GPU whose figure falls below the share of the allocation's median (`slow_below`, None for a single GPU) or,
    for the matmul, below `datasheet` of its model's rate; None when it does neither."""
    key, what, unit = metric
    floor = _datasheet_floor(gpu, datasheet) if key == "gemm_tflops" else None
    below_median = slow_below is not None and gpu[key] < slow_below
    below_floor = floor is not None and gpu[key] < floor
    if not (below_median or below_floor):
        return None
    reasons = []
    if below_median:
        reasons.append(f"{gpu[key] / middle:.0%} of the allocation's median {middle:.3g} {unit}")
    if below_floor:
        reasons.append(f"under {floor:.3g} {unit}, {datasheet:.0%} of what a {gpu['name']} reaches")
    device = "GPU" if gpu.get("index") is not None else "rank"
    return rule.finding(
        f"{_gpu_name(gpu)} is a straggler: its {what} runs at {gpu[key]:.3g} {unit}, "
        f"{' and '.join(reasons)}. Every step of the job waits for its slowest {device}",
        evidence={"nodes": [gpu["node"]], "gpus": [_gpu_ref(gpu)], "metric": key, "value": gpu[key],
                  "median": middle, **({"floor": round(floor, 3)} if floor is not None and below_floor else {})},
        fix=rule.fix(values={"node": gpu["node"]}))


def _gpu_ref(gpu: dict) -> dict:
    return {name: gpu.get(name) for name in ("node", "rank", "index", "uuid", "name")}


@check("GD808")
def preflight_collective_failed(facts, rule):
    hosts = {node["node"]: node.get("host") for node in facts.get("preflight.nodes")}
    failure = facts.get("preflight.failure")
    if not failure:
        return
    unfinished = failure.get("unfinished") or []
    nodes = sorted({item["node"] for item in unfinished})
    ranks = sorted(item["rank"] for item in unfinished)
    who = (f"rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))} on {_names(nodes)} did not finish"
           if ranks else "every rank gave up at once (no single rank to blame)")
    yield rule.finding(
        f"{failure.get('step', 'a collective')} failed ({failure.get('error', 'no reason given')}): {who}; the "
        "others stopped within the deadline. A rank that dies or hangs in a collective is a node that went down, a "
        "GPU that fell off the bus, or a link that dropped",
        evidence={"nodes": nodes, "hosts": sorted({hosts[n] for n in nodes if hosts.get(n)}), "ranks": ranks,
                  "step": failure.get("step")},
        fix=rule.fix(values={"nodes": _names(nodes) or "the nodes of this job"}))


def _links(fabric: dict) -> Iterable[tuple]:
    """(what, nodes, figures) for each measured link: within a node, across every node, between two nodes."""
    for item in fabric.get("intra") or []:
        yield f"within {item['node']}", [item["node"]], item
    if fabric.get("cross"):
        yield "across the nodes", list(fabric["cross"].get("nodes") or []), fabric["cross"]
    for item in fabric.get("pairs") or []:
        yield f"between {item['nodes'][0]} and {item['nodes'][1]}", list(item["nodes"]), item


@check("GD809")
def preflight_fabric_slow(facts, rule):
    fabric = facts.get("preflight.fabric")
    device = facts.get("preflight.device")
    judged = False
    for what, nodes, figures in _links(fabric):
        if figures.get("wrong"):
            judged = True
            yield rule.finding(
                f"all-reduce {what} returned {figures['wrong']} wrong element(s): a corrupting link or GPU",
                evidence={"nodes": nodes, "wrong": figures["wrong"]},
                fix=rule.fix(case="wrong", values={"nodes": _names(nodes)}))
    floor = fabric.get("min_busbw_gbps")
    cross = fabric.get("cross") or {}
    if floor is not None and isinstance(cross.get("busbw_gbps"), (int, float)):
        judged = True
        if cross["busbw_gbps"] < floor:
            yield rule.finding(
                f"all-reduce across the nodes reaches {cross['busbw_gbps']:.3g} GB/s bus bandwidth, under the "
                f"{floor:g} GB/s asked for (--min-busbw)",
                evidence={"nodes": list(cross.get("nodes") or []), "busbw_gbps": cross["busbw_gbps"], "floor": floor},
                fix=rule.fix(values={"nodes": "the pairs of nodes named below, or the fabric as a whole"}))
    if device == "cuda":
        judged = True
        pairs = [pair for pair in fabric.get("pairs") or [] if isinstance(pair.get("busbw_gbps"), (int, float))]
        yield from _slow_pairs(rule, pairs, _limits(facts)["fabric"]["below_median"])
    if not judged:
        raise MissingFact("preflight.fabric", "on CPU the all-reduce runs over this host's loopback through gloo: "
                                              "its bandwidth says nothing of a fabric (pass --min-busbw to judge it)")


def _slow_pairs(rule, pairs: list, fraction: float):
    """Pairs far below the median pair; a node in every slow pair it belongs to (two or more) is the culprit,
    a slow pair whose nodes are fast elsewhere is their link."""
    if len(pairs) < 3:
        return
    middle = _median(pair["busbw_gbps"] for pair in pairs)
    slow = [pair for pair in pairs if pair["busbw_gbps"] < fraction * middle]
    blamed = set()
    for node in sorted({node for pair in slow for node in pair["nodes"]}):
        mine = [pair for pair in pairs if node in pair["nodes"]]
        if len(mine) >= 2 and all(pair in slow for pair in mine):
            blamed.add(node)
            figures = ", ".join(f"{pair['busbw_gbps']:.3g}" for pair in mine)
            yield rule.finding(
                f"{node} is slow on the fabric: every pair it is in reaches only {figures} GB/s bus bandwidth, "
                f"against a median pair's {middle:.3g} GB/s",
                evidence={"nodes": [node], "pairs": [pair["nodes"] for pair in mine], "median": middle},
                fix=rule.fix(values={"nodes": node}))
    for pair in slow:
        if not blamed & set(pair["nodes"]):
            yield rule.finding(
                f"the link between {pair['nodes'][0]} and {pair['nodes'][1]} is slow: {pair['busbw_gbps']:.3g} GB/s "
                f"bus bandwidth against a median pair's {middle:.3g} GB/s, while both nodes are fast with others",
                evidence={"nodes": [], "pairs": [pair["nodes"]], "median": middle},
                fix=rule.fix(case="link", values={"nodes": " and ".join(pair["nodes"])}))
