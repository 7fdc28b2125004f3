"""Flags that several commands share for gathering facts, and the gather.Request they turn into."""

from __future__ import annotations

import argparse
import sys

from gpudoctor.cli.common import path
from gpudoctor.cli.training import model_option, training_flags
from gpudoctor.gather import MAX_TIMEOUT, Request
from gpudoctor.ingest.registry import in_words


def seconds(text: str) -> float:
    """`--timeout`: a finite number of seconds above 0 and at most MAX_TIMEOUT (`nan`, `inf`, `1e400`, `0`, `-1`
    are usage errors)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= MAX_TIMEOUT:  # also false for nan
        raise argparse.ArgumentTypeError(f"{text!r}: give seconds above 0 and at most {MAX_TIMEOUT:g}")
    return value


def add_machine_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--python", type=path, default=sys.executable, metavar="PATH",
                        help="interpreter whose torch/deepspeed to inspect (default: this one)")
    parser.add_argument("--timeout", type=seconds, default=15.0, metavar="SECONDS",
                        help="time limit for each probe (default: 15; at most a day)")
    parser.add_argument("--quick", action="store_true",
                        help="read torch's versions from its files instead of importing it (fast; whether CUDA "
                             "works, the arch list and import errors stay unknown)")


def add_from_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--from", type=path, dest="from_reports", action="append", default=[], metavar="REPORT",
                        help=f"use a pasted report or a log instead of this machine: {in_words()} "
                             "(docs/reports.md, docs/logs.md); repeatable, '-' reads stdin")


def add_env_file_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env-file", type=path, action="append", default=[], metavar="FILE",
                        help="overlay the variables this file sets (.env, sbatch/shell script, Dockerfile, K8s "
                             "manifest) on this process's environment; repeatable")


def gather_request(args: argparse.Namespace, groups=None) -> Request:
    """The gather.Request the command line describes; live probes gather `groups` (None: every rule's)."""
    return Request(
        snapshot=getattr(args, "snapshot", None), reports=tuple(getattr(args, "from_reports", None) or ()),
        groups=None if groups is None else frozenset(groups),
        python=getattr(args, "python", sys.executable), timeout=getattr(args, "timeout", 15.0),
        quick=getattr(args, "quick", False),
        scripts=tuple(getattr(args, "script", None) or ()), ds_config=getattr(args, "ds_config", None),
        env_files=tuple(getattr(args, "env_file", None) or ()),
        model=model_option(args), training=training_flags(args),
    )
