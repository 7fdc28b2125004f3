"""`gpudoctor bench nccl` and `gpudoctor bench train`: run a real benchmark, print it, judge it with GD701–GD703.

Exit codes: 0 all good; 1 results wrong, a threshold missed, a step failed, or the benchmark could not run;
2 usage error (including torch missing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import List

from gpudoctor.cli.common import UsageError, add_force_option, output_stream, path, positive_number
from gpudoctor.cli.options import seconds
from gpudoctor.cli.training import positive
from gpudoctor.render.printable import printable
from gpudoctor.render.terminal import width, wrap


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
    nccl.add_argument("--min-busbw", type=positive_number, default=None, metavar="GB/s",
                      help="GD702: fail when the average busbw over the large sizes is below this")
    nccl.add_argument("--timeout", type=seconds, default=120.0, metavar="SECONDS",
                      help="under torchrun/srun: time to meet the other ranks, and for each collective (default "
                           "120)")
    _output_options(nccl)
    _plot_option(nccl)
    nccl.set_defaults(run=run_nccl)

    compare = kinds.add_parser("compare", help="two `bench nccl --format json` results side by side, with the ratio "
                                               "per size")
    compare.add_argument("first", type=path, metavar="A.json", help="the first run (before)")
    compare.add_argument("second", type=path, metavar="B.json", help="the second run (after)")
    compare.add_argument("--output", "-o", type=path, metavar="FILE",
                         help="write the table to FILE (- or none: stdout)")
    add_force_option(compare)
    _plot_option(compare)
    compare.set_defaults(run=run_compare)

    train = kinds.add_parser("train", help="training-step microbenchmark: tokens/s, TFLOP/s, MFU, peak memory")
    train.add_argument("--layers", type=positive, default=2, help="transformer blocks of the GPT")
    train.add_argument("--hidden", type=positive, default=128, help="hidden size")
    train.add_argument("--heads", type=positive, default=4, help="attention heads (must divide --hidden)")
    train.add_argument("--seq-len", type=positive, default=128, help="tokens per sequence")
    train.add_argument("--micro-batch", type=positive, default=4, help="sequences per step")
    train.add_argument("--vocab", type=positive, default=1024, help="vocabulary size")
    train.add_argument("--steps", type=positive, default=10, help="timed steps (default 10)")
    train.add_argument("--warmup", type=int, default=2, help="untimed steps first (default 2)")
    train.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "fp16"),
                       help="fp32, or bf16/fp16 autocast (fp16 with a GradScaler; GPU only)")
    train.add_argument("--lr", type=positive_number, default=1e-3, help="AdamW learning rate")
    train.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                       help="auto: the first GPU, else the CPU")
    _output_options(train)
    train.set_defaults(run=run_train)


def _output_options(parser) -> None:
    parser.add_argument("--format", choices=("plain", "json"), default="plain", help="output format")
    parser.add_argument("--output", "-o", type=path, metavar="FILE",
                        help="write the output to FILE (- or none: stdout)")
    add_force_option(parser)


def _plot_option(parser) -> None:
    parser.add_argument("--plot", type=path, metavar="FILE",
                        help="also draw busbw against message size into FILE (.svg or .png; needs matplotlib: "
                             "pip install matplotlib)")


def _missing(parser) -> int:
    parser.print_help()
    return 2


def _write(args, result: dict, findings: List, plain: str) -> int:
    with output_stream(args) as stream:
        if args.format == "json":
            json.dump({**result, "findings": [f.to_json() for f in findings]}, stream, indent=2, ensure_ascii=False)
            stream.write("\n")
        else:  # names and values from the machine (a GPU's name, an env value) are shown escaped
            columns = width(stream)
            for line in printable(plain).splitlines():  # a line too wide breaks at spaces, never inside a word
                stream.write("\n".join(wrap(line, columns, "", "   ")) + "\n")
            for finding in findings:
                said = printable(f"✗ {finding.rule} {finding.name}: {finding.message}", one_line=True)
                stream.write("\n".join(wrap(said, columns, "", "  ")
                                       + wrap(f"fix: {printable(finding.fix.summary, one_line=True)}", columns, "  ",
                                              "       ")) + "\n")
    return 1 if findings else 0


def run_nccl(args: argparse.Namespace) -> int:
    from gpudoctor.bench import BenchError, BenchUsageError, nccl, progress, report

    if args.iters < 1 or args.warmup < 0:
        raise UsageError("--iters must be at least 1 and --warmup 0 or more")
    if args.plot:
        from gpudoctor.render.bench_plot import image_format

        image_format(args.plot)  # a wrong suffix is said before the benchmark runs
    if args.nprocs is not None and args.nprocs < 1:
        raise UsageError("--nprocs must be at least 1")
    try:
        config = nccl.make_config(args.min_bytes, args.max_bytes, op=args.op, iters=args.iters, warmup=args.warmup,
                                  backend=args.backend, min_busbw=args.min_busbw, timeout=args.timeout,
                                  progress=progress.wanted(args.format))
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d's retry lines: the failure is said in one line
    try:
        rank, result = nccl.run(config, args.nprocs)
    except BenchUsageError as exc:
        raise UsageError(str(exc)) from None
    except BenchError as exc:
        print(f"gpudoctor: bench nccl failed: {exc}", file=sys.stderr)
        return 1
    findings = report.judge({"nccl": result}, report.NCCL_RULES)
    if rank.rank != 0:  # every rank has the same result; rank 0 speaks
        return 1 if findings else 0
    if args.plot:
        from gpudoctor.render.bench_plot import write_plot

        write_plot(args.plot, [("", result)], force=args.force)
    return _write(args, result, findings, report.render_nccl(result))


def run_compare(args: argparse.Namespace) -> int:
    from gpudoctor.bench import report

    if args.plot:
        from gpudoctor.render.bench_plot import image_format

        image_format(args.plot)  # a wrong suffix is said before anything is read
    runs = [(name, _nccl_result(name)) for name in (args.first, args.second)]
    with output_stream(args) as stream:
        stream.write(printable(report.render_compare(*runs)))
    if args.plot:
        from gpudoctor.render.bench_plot import write_plot

        write_plot(args.plot, [(f"A {runs[0][0]}", runs[0][1]), (f"B {runs[1][0]}", runs[1][1])], force=args.force)
    return 0


def _nccl_result(name: str) -> dict:
    """A `bench nccl --format json` document from a file; a usage error in one line for anything else."""
    from gpudoctor.files import read_input

    try:
        data = json.loads(read_input(name, "benchmark"))
    except ValueError as exc:
        raise UsageError(f"{name}: not JSON ({exc})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(data, dict) or data.get("schema") != "gpudoctor.bench.nccl/1" or not isinstance(rows, list) \
            or not all(isinstance(row, dict) and isinstance(row.get("op"), str) and isinstance(row.get("bytes"), int)
                       and isinstance(row.get("busbw_gbps"), (int, float)) for row in rows):
        raise UsageError(f"{name}: not a `gpudoctor bench nccl --format json` result (gpudoctor.bench.nccl/1)")
    return data


def run_train(args: argparse.Namespace) -> int:
    from gpudoctor.bench import BenchError, progress, report, train

    config = train.TrainConfig(layers=args.layers, hidden=args.hidden, heads=args.heads, seq_len=args.seq_len,
                               micro_batch=args.micro_batch, vocab=args.vocab, steps=args.steps, warmup=args.warmup,
                               precision=args.precision, lr=args.lr, device=args.device,
                               progress=progress.wanted(args.format))
    try:
        result = train.run(config)
    except BenchError as exc:
        raise UsageError(str(exc)) from None
    findings = report.judge({"train": result}, report.TRAIN_RULES)
    return _write(args, result, findings, report.render_train(result))
