"""`gpudoctor bench nccl` and `gpudoctor bench train`: run a real benchmark, print it, judge it with GD701–GD703.

Exit codes: 0 all good; 1 results wrong, a threshold missed, a step failed, or the benchmark could not run;
2 usage error (including torch missing).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from gpudoctor.bench import BenchError
from gpudoctor.cli.common import UsageError, output_stream
from gpudoctor.units import size

NCCL_RULES = ("GD701", "GD702")
TRAIN_RULES = ("GD703",)


def add_parser(subparsers) -> None:
    bench = subparsers.add_parser("bench", help="real benchmarks: NCCL/gloo collectives, training steps")
    kinds = bench.add_subparsers(dest="bench", metavar="BENCH", parser_class=type(bench))
    bench.set_defaults(run=lambda args: _missing(bench))

    nccl = kinds.add_parser("nccl", help="collective bandwidth sweep (nccl-tests columns); gloo on CPU")
    nccl.add_argument("--op", default="all_reduce",
                      choices=("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall"), metavar="OP",
                      help="the collective to time: all_reduce, all_gather, reduce_scatter, broadcast, alltoall")
    nccl.add_argument("-b", "--min-bytes", default="8", metavar="SIZE", help="smallest size (8, 64K, 1M; default 8)")
    nccl.add_argument("-e", "--max-bytes", default=None, metavar="SIZE",
                      help="largest size, doubling from -b (default 128M on GPUs, 1M on CPU)")
    nccl.add_argument("-n", "--iters", type=int, default=20, help="timed calls per size (default 20)")
    nccl.add_argument("-w", "--warmup", type=int, default=5, help="untimed calls per size first (default 5)")
    nccl.add_argument("--nprocs", type=int, default=None,
                      help="local ranks to spawn (default: one per GPU, 2 on CPU); ignored under torchrun/srun")
    nccl.add_argument("--backend", default="auto", choices=("auto", "nccl", "gloo"),
                      help="auto: NCCL on GPUs, gloo on CPU")
    nccl.add_argument("--min-busbw", type=float, default=None, metavar="GB/s",
                      help="GD702: fail when the average busbw over the large sizes is below this")
    _output_options(nccl)
    nccl.set_defaults(run=run_nccl)

    train = kinds.add_parser("train", help="training-step microbenchmark: tokens/s, TFLOP/s, MFU, peak memory")
    train.add_argument("--layers", type=int, default=2, help="transformer blocks of the GPT")
    train.add_argument("--hidden", type=int, default=128, help="hidden size")
    train.add_argument("--heads", type=int, default=4, help="attention heads (must divide --hidden)")
    train.add_argument("--seq-len", type=int, default=128, help="tokens per sequence")
    train.add_argument("--micro-batch", type=int, default=4, help="sequences per step")
    train.add_argument("--vocab", type=int, default=1024, help="vocabulary size")
    train.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    train.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    train.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"),
                       help="fp32, or bf16/fp16 autocast (fp16 with a GradScaler; GPU only)")
    train.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                       help="auto: the first GPU, else the CPU")
    _output_options(train)
    train.set_defaults(run=run_train)


def _output_options(parser) -> None:
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the output to FILE (- or none: stdout)")


def _missing(parser) -> int:
    parser.print_help()
    return 2


def _judge(facts: dict, rule_ids) -> List:
    """The GD7xx findings for these benchmark facts, through the same engine as `check`."""
    from gpudoctor.catalog import find_rule
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    rules = [find_rule(rule_id) for rule_id in rule_ids]
    report = evaluate(Snapshot(facts={"bench": facts}, source={"kind": "bench", "paths": []}),
                      [rule for rule in rules if rule is not None])
    return list(report.findings)


def _write(args, result: dict, findings: List, plain: str) -> int:
    with output_stream(args) as stream:
        if args.format == "json":
            json.dump({**result, "findings": [f.to_json() for f in findings]}, stream, indent=2, ensure_ascii=False)
            stream.write("\n")
        else:
            stream.write(plain)
            for finding in findings:
                stream.write(f"✗ {finding.rule} {finding.name}: {finding.message}\n  fix: {finding.fix.summary}\n")
    return 1 if findings else 0


def _size_arg(text: str, flag: str) -> int:
    from gpudoctor.bench.nccl import parse_size  # no torch import: usage errors stay fast

    try:
        return parse_size(text)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def run_nccl(args: argparse.Namespace) -> int:
    from gpudoctor.bench import BenchUsageError, nccl, progress, require_torch

    if args.iters < 1 or args.warmup < 0:
        raise UsageError("--iters must be at least 1 and --warmup 0 or more")
    if args.nprocs is not None and args.nprocs < 1:
        raise UsageError("--nprocs must be at least 1")
    min_bytes = _size_arg(args.min_bytes, "-b/--min-bytes")
    max_bytes = _size_arg(args.max_bytes, "-e/--max-bytes") if args.max_bytes else None
    try:
        nccl.check_sizes(min_bytes, max_bytes if max_bytes is not None else min_bytes)
        torch = require_torch()
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    if max_bytes is None:
        default = "128M" if torch.cuda.is_available() and args.backend != "gloo" else "1M"
        max_bytes = max(min_bytes, nccl.parse_size(default))
    config = nccl.NcclConfig(op=args.op, min_bytes=min_bytes, max_bytes=max_bytes, iters=args.iters,
                             warmup=args.warmup, backend=args.backend, min_busbw=args.min_busbw,
                             progress=progress.wanted(args.format))
    try:
        rank, result = nccl.run(config, args.nprocs)
    except BenchUsageError as exc:
        raise UsageError(str(exc)) from None
    except BenchError as exc:
        print(f"gpudoctor: bench nccl failed: {exc}", file=sys.stderr)
        return 1
    findings = _judge({"nccl": result}, NCCL_RULES)
    if rank.rank != 0:  # every rank has the same result; rank 0 speaks
        return 1 if findings else 0
    return _write(args, result, findings, render_nccl(result))


def render_nccl(result: dict) -> str:
    """The nccl-tests-like table (UX.md)."""
    version = f" {result['backend_version']}" if result.get("backend_version") else ""
    nodes = result.get("nodes", 1)
    ranks = result["world_size"]
    lines = [f"{result['op']} · {result['backend']}{version} · {ranks} rank{'s' if ranks != 1 else ''} on {nodes} "
             f"node{'s' if nodes != 1 else ''} · {result['dtype']} · {result['iters']} iters, "
             f"{result['warmup']} warm-up" + (f" · {result['device_name']}" if result.get("device_name") else ""),
             f"{'size':>12} {'count':>10} {'time(us)':>10} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} {'#wrong':>7}"]
    top = max((row["busbw_gbps"] for row in result["rows"]), default=0) or 1.0
    for row in result["rows"]:
        bar = "█" * int(round(20 * row["busbw_gbps"] / top))
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


def run_train(args: argparse.Namespace) -> int:
    from gpudoctor.bench import progress, train

    config = train.TrainConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, seq_len=args.seq_len,
                               micro_batch=args.micro_batch, vocab=args.vocab, steps=args.steps, warmup=args.warmup,
                               precision=args.precision, lr=args.lr, device=args.device,
                               progress=progress.wanted(args.format))
    try:
        result = train.run(config)
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    findings = _judge({"train": result}, TRAIN_RULES)
    return _write(args, result, findings, render_train(result))


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
             f" peak memory: {size(result['peak_memory_bytes'])} ({result['peak_memory_kind']})",
             f" loss: {_num(result['loss']['first'], '.4f')} → {_num(result['loss']['last'], '.4f')}"]
    return "\n".join(lines) + "\n"
