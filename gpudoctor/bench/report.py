"""What a benchmark's result means: its GD7xx findings (through the same engine as `check`) and its plain text."""

from __future__ import annotations

from typing import List, Optional, Tuple

from gpudoctor.units import size

NCCL_RULES = ("GD701", "GD702")
BAR = 10  # the widest bar: a row of the table is then 80 columns
TRAIN_RULES = ("GD703",)

PEAK_KIND = {"cuda_max_memory_allocated": "torch's peak on the GPU",  # bench/train.py's peak_memory_kind
             "process_peak_rss": "the whole process's peak RAM, torch included"}


def judge(facts: dict, rule_ids) -> List:
    """The GD7xx findings for these benchmark facts, through the same engine as `check`."""
    from gpudoctor.catalog import find_rule
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    rules = [find_rule(rule_id) for rule_id in rule_ids]
    report = evaluate(Snapshot(facts={"bench": facts}, source={"kind": "bench", "paths": []}),
                      [rule for rule in rules if rule is not None])
    return list(report.findings)


def render_nccl(result: dict) -> str:
    """The nccl-tests-like table (UX.md)."""
    version = f" {result['backend_version']}" if result.get("backend_version") else ""
    nodes = result.get("nodes", 1)
    ranks = result["world_size"]
    lines = [f"{result['op']} · {result['backend']}{version} · {ranks} rank{'s' if ranks != 1 else ''} on {nodes} "
             f"node{'s' if nodes != 1 else ''} · {result['dtype']} · {result['iters']} iters, "
             f"{result['warmup']} warm-up" + (f" · {result['device_name']}" if result.get("device_name") else ""),
             f"{'size':>12} {'count':>10} {'time(us)':>10} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}"]
    if result.get("device") == "cpu":
        lines.insert(1, f" on CPU (no GPU here): this measures {result['backend']} between processes, not NCCL")
    top = max((row["busbw_gbps"] for row in result["rows"]), default=0) or 1.0
    for row in result["rows"]:
        bar = "█" * int(round(BAR * row["busbw_gbps"] / top))
        lines.append(f"{size(row['bytes']):>12} {row['count']:>10} {row['time_us']:>10.1f} {row['algbw_gbps']:>12.2f} "
                     f"{row['busbw_gbps']:>12.2f} {row['wrong']:>7}  {bar}".rstrip())
    summary = result["summary"]
    if summary.get("busbw_zero_by_definition"):
        lines.append(f" busbw: 0 by definition on 1 rank ({result['op']} moves no data between ranks)"
                     + ("; --min-busbw not judged" if summary.get("min_busbw_gbps") is not None else ""))
    if summary.get("avg_busbw_gbps") is not None:
        line = f" avg busbw (sizes ≥ {size(summary['large_from_bytes'])}): {summary['avg_busbw_gbps']:.2f} GB/s"
        if summary.get("min_busbw_gbps") is not None:
            met = summary["avg_busbw_gbps"] >= summary["min_busbw_gbps"]
            line += f" · required (--min-busbw): ≥ {summary['min_busbw_gbps']:g} GB/s  {'✓' if met else '✗'}"
        lines.append(line)
    lines.append(f" #wrong: {summary['wrong']} · time per op on the slowest rank")
    return "\n".join(lines) + "\n"


def _num(value: Optional[float], fmt: str, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:{fmt}}{unit}"


def render_train(result: dict) -> str:
    model = result["model"]
    times = result["step_time_s"]
    lines = [f"train step · {result['device']}" + (f" ({result['device_name']})" if result.get("device_name") else "")
             + f" · {result['precision']} · GPT {model['layers']}×{model['hidden']} ({model['heads']} heads), "
             f"{model['params']:,} params · micro batch {model['micro_batch']} × seq {model['seq_len']}",
             f" steps: {result['steps_completed']}/{result['steps']} timed ({result['warmup']} warm-up)",
             f" step time: median {_num(times['median'], '.4f', ' s')} · min {_num(times['min'], '.4f', ' s')}"
             f" · max {_num(times['max'], '.4f', ' s')}",
             f" throughput: {_num(result['tokens_per_s'], ',.0f', ' tokens/s')} · "
             f"{_num(result['tflops'], '.4f', ' TFLOP/s')} · MFU {_num(result['mfu'], '.1%')}"
             + ("" if result.get("peak_tflops") else " (no known peak for this device)"),
             f" peak memory: {size(result['peak_memory_bytes'])} "
             f"({PEAK_KIND.get(result['peak_memory_kind'], result['peak_memory_kind'])})",
             f" loss: {_num(result['loss']['first'], '.4f')} → {_num(result['loss']['last'], '.4f')}"]
    return "\n".join(lines) + "\n"


def render_compare(first: Tuple[str, dict], second: Tuple[str, dict]) -> str:
    """Two `bench nccl` runs side by side (before and after a driver or NCCL change): busbw per collective and size,
    and the second's over the first's; a size one run lacks shows as –."""
    (name_a, a), (name_b, b) = first, second
    lines = [f"A: {name_a} · {_run_words(a)}", f"B: {name_b} · {_run_words(b)}",
             f"{'op':<15} {'size':>10} {'A busbw(GB/s)':>14} {'B busbw(GB/s)':>14} {'B/A':>7}"]
    rows_a = {(row["op"], row["bytes"]): row["busbw_gbps"] for row in a["rows"]}
    rows_b = {(row["op"], row["bytes"]): row["busbw_gbps"] for row in b["rows"]}
    for op, nbytes in sorted(set(rows_a) | set(rows_b), key=lambda key: (key[0], key[1])):
        value_a, value_b = rows_a.get((op, nbytes)), rows_b.get((op, nbytes))
        lines.append(f"{op:<15} {size(nbytes):>10} {_busbw(value_a):>14} {_busbw(value_b):>14} "
                     f"{_ratio(value_a, value_b):>7}")
    avg_a, avg_b = (run["summary"].get("avg_busbw_gbps") for run in (a, b))
    if avg_a is not None and avg_b is not None:
        lines.append(f" avg busbw over the large sizes: A {avg_a:.2f} · B {avg_b:.2f} GB/s · "
                     f"B/A {_ratio(avg_a, avg_b)}")
    return "\n".join(lines) + "\n"


def _run_words(result: dict) -> str:
    version = f" {result['backend_version']}" if result.get("backend_version") else ""
    return (f"{result['backend']}{version} · {result['world_size']} ranks on {result['nodes']} node"
            f"{'s' if result['nodes'] != 1 else ''}" + (f" · {result['device_name']}" if result.get("device_name")
                                                          else f" · {result['device']}"))


def _busbw(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}"


def _ratio(first: Optional[float], second: Optional[float]) -> str:
    return "–" if first is None or second is None or not first else f"{second / first:.2f}"
