"""`gpudoctor estimate --model …`: training memory per GPU, term by term."""

from __future__ import annotations

import argparse
import json
import sys

from gpudoctor.cli.common import UsageError, output_format, path
from gpudoctor.cli.training import add_training_options, model_option, training_flags


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("estimate", help="training memory per GPU, term by term (--model SIZE_OR_CONFIG)")
    add_training_options(parser, required=True)
    parser.add_argument("--ds-config", type=path, metavar="FILE",
                        help="take precision, ZeRO stage, offload and micro batch "
                                                            "from this DeepSpeed config")
    parser.add_argument("--gpu", metavar="NAME", help='compare with this GPU ("A100 40GB", "a100-80g", "H100 SXM", '
                                                      '"4090", or a size such as 24GB) (default: this machine\'s '
                                                      'GPUs)')
    parser.add_argument("--format", choices=("rich", "plain", "json"),
                        help="output format (default: rich on a terminal, else plain)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from gpudoctor.fit import fit
    from gpudoctor.render.estimate import render_plain, render_rich
    from gpudoctor.render.printable import printable_data

    model = model_option(args)
    if model is None:  # the parser requires --model; a caller that built `args` itself is told the same
        raise UsageError("estimate needs --model SIZE_OR_CONFIG")
    est, gpus = fit(model, training_flags(args), args.ds_config, args.gpu)
    fmt = output_format(args)
    if fmt == "json":
        json.dump(est.to_json(gpus), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    else:  # a model or GPU name from a file or a flag is shown escaped (gpudoctor.render.printable)
        (render_rich if fmt == "rich" else render_plain)(printable_data(est), printable_data(gpus), sys.stdout)
    return 0
