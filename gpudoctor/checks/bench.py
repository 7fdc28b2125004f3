"""GD7xx: benchmark results (`gpudoctor bench nccl` / `bench train`, or a snapshot holding their JSON).

Facts: `bench.nccl` is the `gpudoctor.bench.nccl/1` document (rows, summary), `bench.train` the
`gpudoctor.bench.train/1` document (with `error` when a step failed).
"""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.bench import measured
from gpudoctor.units import size


@check("GD701")
def nccl_wrong_results(facts, rule):
    result = facts.get("bench.nccl", None)  # no benchmark ran: nothing to judge (like a lint without a script)
    if not result:
        return
    bad = [row for row in measured(result).get("rows", []) if row.get("wrong")]
    out_of_bounds = result.get("out_of_bounds") or 0  # nccl-tests' `# Out of bounds values : 5 FAILED`
    if not bad and not out_of_bounds:
        return
    total = sum(row["wrong"] for row in bad)
    where = ", ".join(size(row["bytes"]) for row in bad[:4]) + ("…" if len(bad) > 4 else "")
    found = (f"returned {total} wrong element(s) at {len(bad)} size(s) ({where})" if bad else
             f"reported {out_of_bounds} out-of-bounds value(s)")
    yield rule.finding(
        f"{result.get('op', 'collective')} over {result.get('backend', '?')} on {result.get('world_size', '?')} ranks "
        f"{found}: the interconnect, a GPU or the NCCL/driver stack corrupts data, and training would silently "
        "diverge",
        evidence={"op": result.get("op"), "backend": result.get("backend"), "world_size": result.get("world_size"),
                  "wrong": total, "sizes": [row["bytes"] for row in bad]},
        fix=rule.fix())


@check("GD702")
def nccl_bandwidth_low(facts, rule):
    result = facts.get("bench.nccl", None)  # no benchmark ran: nothing to judge (like a lint without a script)
    if not result:
        return
    summary = measured(result).get("summary") or {}
    threshold, avg = summary.get("min_busbw_gbps"), summary.get("avg_busbw_gbps")
    if threshold is not None and (summary.get("busbw_zero_by_definition") or (
            result.get("world_size") == 1 and result.get("op") != "broadcast")):
        raise MissingFact("bench.nccl.summary.avg_busbw_gbps")  # 0 by definition on one rank: not a measurement
    if threshold is None or avg is None or avg >= threshold:
        return
    yield rule.finding(
        f"{result.get('op', 'collective')} average bus bandwidth {avg:.2f} GB/s over the large sizes "
        f"(≥ {size(summary.get('large_from_bytes'))}) on {result.get('world_size', '?')} ranks "
        f"({result.get('backend', '?')}) is below the required {threshold:g} GB/s",
        evidence={"avg_busbw_gbps": avg, "min_busbw_gbps": threshold, "op": result.get("op"),
                  "backend": result.get("backend"), "world_size": result.get("world_size"),
                  "large_from_bytes": summary.get("large_from_bytes")},
        fix=rule.fix())


@check("GD703")
def train_step_failed(facts, rule):
    result = facts.get("bench.train", None)
    if not result or not result.get("error"):
        return
    error = result["error"]
    kind = error.get("kind")
    model = result.get("model") or {}
    shape = ", ".join(f"{key} {model[key]}" for key in ("params", "layers", "hidden", "seq_len", "micro_batch")
                      if key in model)
    yield rule.finding(
        f"the training microbenchmark failed at step {error.get('step')} on {result.get('device', '?')} "
        f"({result.get('precision', '?')}; {shape}): {error.get('type')}: {error.get('message')}",
        evidence={"step": error.get("step"), "type": error.get("type"), "message": error.get("message"),
                  "device": result.get("device"), "precision": result.get("precision"), "model": dict(model)},
        fix=rule.fix(case=kind if kind in ("oom", "nonfinite") else "error"))
