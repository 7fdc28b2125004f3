"""`gpudoctor lint FILE...`: the host-independent rules over job files only (env files, job scripts,
Kubernetes manifests, Dockerfiles, training scripts, DeepSpeed configs). No machine probing."""

from __future__ import annotations

import argparse
import dataclasses
import time

from gpudoctor.api import lint
from gpudoctor.cli.common import (
    UsageError,
    add_output_options,
    add_selection_options,
    output_format,
    output_stream,
    path,
    selected_rules,
)
from gpudoctor.model import exit_code
from gpudoctor.render import render_report


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("lint", help="check job files (env, sbatch, k8s, Dockerfile, scripts) only")
    parser.add_argument("files", type=path, nargs="*", metavar="PATH",
                        help="job files (env, shell/sbatch, K8s, Dockerfile, DeepSpeed config, .py), folders to "
                             "lint recursively (what .gitignore names is skipped), or - for standard input; "
                             "none: `paths` "
                             "of [tool.gpudoctor] in pyproject.toml")
    parser.add_argument("--stdin-filename", type=path, default="<stdin>", metavar="NAME",
                        help="with -: the name the text from standard input has, which can decide its format "
                             "(job.sbatch, ds_config.json, .env) and is shown in the findings")
    parser.add_argument("--skip-unknown", action="store_true",
                        help="skip the named files no reader knows (README.md, package.json) as a folder's are, "
                             "instead of reporting them (for pre-commit hooks, which hand over every text file)")
    add_selection_options(parser)
    add_output_options(parser)
    parser.set_defaults(run=run)


def stdin_text() -> str:
    """Standard input's text (`lint -`), bounded as a file is; a usage error in one line."""
    from gpudoctor.files import read_bytes

    try:
        return read_bytes("-").decode("utf-8", "replace")
    except OSError as exc:
        raise UsageError(f"cannot read standard input: {exc.strerror or exc}") from None


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    files, texts = list(args.files), {}
    if files.count("-") > 1:
        raise UsageError("- (standard input) given more than once")
    if "-" in files:
        files[files.index("-")] = args.stdin_filename
        texts[args.stdin_filename] = stdin_text()
    report = lint(files, selected_rules(args, host=False), known_ids=args.site_rule_ids, texts=texts,
                  skip_unknown=args.skip_unknown)
    report = dataclasses.replace(report, seconds=time.monotonic() - started)
    with output_stream(args) as stream:
        render_report(report, output_format(args), stream, quiet=True)
    return exit_code(report.worst(), args.fail_on)
