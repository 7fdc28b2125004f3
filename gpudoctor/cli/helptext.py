"""What every `--help` shows beyond argparse's list: a description, each option's default, examples, and the
options every command accepts after its name (`gpudoctor check --no-color --debug`)."""

from __future__ import annotations

import argparse
from typing import Dict, Iterator, List, Tuple

EXAMPLES: Dict[str, List[Tuple[str, str]]] = {
    "": [
        ("check this machine", "gpudoctor check"),
        ("what a command does and its options", "gpudoctor check --help"),
        ("the rules and one rule's documentation", "gpudoctor rules; gpudoctor explain GD101"),
    ],
    "check": [
        ("this machine", "gpudoctor check"),
        ("the job's interpreter and files",
         "gpudoctor check --python ~/venv/bin/python --script train.py \\\n"
         "      --ds-config ds.json --model config.json"),
        ("a report someone pasted", "gpudoctor check --from collect_env.txt"),
    ],
    "lint": [
        ("a SLURM job script", "gpudoctor lint job.sbatch"),
        ("every job file under a folder", "gpudoctor lint ."),
        ("a training script and a DeepSpeed config", "gpudoctor lint train.py ds.json"),
        ("findings for GitHub code scanning", "gpudoctor lint . --format sarif -o gpudoctor.sarif"),
        ("a file from standard input", "git show HEAD:job.sbatch | gpudoctor lint - --stdin-filename job.sbatch"),
    ],
    "fix": [
        ("show what would change in the job's .env", "gpudoctor fix --env-file .env --write-env .env --dry-run"),
        ("the lines a SLURM TaskProlog prints", "gpudoctor fix --format slurm"),
    ],
    "snapshot": [
        ("record this machine", "gpudoctor snapshot -o node.json"),
        ("replay it elsewhere", "gpudoctor check --snapshot node.json"),
        ("the facts of a pasted report, on stdout", "gpudoctor snapshot --from report.txt -o -"),
    ],
    "rules": [
        ("the catalog", "gpudoctor rules"),
        ("with a site's own rules", "gpudoctor rules --policy site.toml"),
    ],
    "explain": [
        ("one rule's documentation", "gpudoctor explain GD101"),
        ("as JSON", "gpudoctor explain GD503 --format json"),
    ],
    "bench": [
        ("collective bandwidth", "gpudoctor bench nccl"),
        ("training steps of a small GPT", "gpudoctor bench train"),
    ],
    "bench nccl": [
        ("all_reduce from 1 KiB to 1 MiB", "gpudoctor bench nccl -b 1K -e 1M"),
        ("every rank of a two-node job", "srun -N2 --ntasks-per-node=8 gpudoctor bench nccl"),
        ("fail below a bus bandwidth", "gpudoctor bench nccl --min-busbw 300"),
        ("draw busbw against message size", "gpudoctor bench nccl -e 1G --plot fabric.svg"),
    ],
    "bench compare": [
        ("before and after a driver or NCCL upgrade", "gpudoctor bench compare before.json after.json"),
        ("and draw both", "gpudoctor bench compare before.json after.json --plot compare.png"),
    ],
    "bench train": [
        ("the default small GPT", "gpudoctor bench train"),
        ("a wider model in bf16", "gpudoctor bench train --layers 4 --hidden 512 --precision bf16"),
    ],
    "estimate": [
        ("a Hugging Face config on this machine's GPUs", "gpudoctor estimate --model config.json"),
        ("a 7B model on an 80 GB A100", 'gpudoctor estimate --model 7B --gpu "A100 80GB"'),
        ("ZeRO settings from a DeepSpeed config", "gpudoctor estimate --model 7B --ds-config ds.json --gpu 4090"),
    ],
    "mcp": [
        ("serve the tools on stdin/stdout (an assistant starts it)", "gpudoctor mcp"),
        ("register it with Claude Code", "claude mcp add gpudoctor -- gpudoctor mcp"),
    ],
    "completion": [
        ("bash, for every user", "gpudoctor completion bash > /etc/bash_completion.d/gpudoctor"),
        ("zsh (a folder on $fpath)", 'gpudoctor completion zsh > "${fpath[1]}/_gpudoctor"'),
        ("fish", "gpudoctor completion fish > ~/.config/fish/completions/gpudoctor.fish"),
    ],
    "fleet": [
        ("compare the snapshots of a job's nodes", "gpudoctor fleet node-*.json"),
        ("from inside the job instead", "srun --ntasks-per-node=1 gpudoctor check --fleet"),
    ],
    "preflight": [
        ("in the sbatch, before the training srun", "srun --ntasks-per-node=8 --gpus-per-task=1 gpudoctor preflight"),
        ("under torchrun, on every node", "torchrun --nnodes=$N --nproc-per-node=8 -m gpudoctor preflight"),
    ],
}


def _commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[Tuple[str, argparse.ArgumentParser, str]]:
    """(command path, parser, its one-line help) for every command and sub-command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                yield full, sub, helps.get(name) or ""
                yield from _commands(sub, full)


def _with_default(action: argparse.Action) -> None:
    default = action.default
    if action.help in (None, argparse.SUPPRESS) or default in (None, False, [], argparse.SUPPRESS, ""):
        return
    if "default" not in action.help:
        action.help += f" (default: {default})"


def _examples(path: str) -> str:
    return "examples:\n" + "\n".join(f"  # {what}\n  {command}" for what, command in EXAMPLES.get(path, []))


def finish(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _examples("")
    for path, sub, one_line in _commands(parser):
        sub.formatter_class = argparse.RawDescriptionHelpFormatter
        if not sub.description:
            sub.description = one_line[:1].upper() + one_line[1:] + "."
        if not sub.epilog:
            sub.epilog = _examples(path)
        options = {option for action in sub._actions for option in action.option_strings}
        if any(isinstance(action, argparse._SubParsersAction) for action in sub._actions):
            continue  # `bench --no-color nccl` would be overwritten by nccl's own default
        if "--no-color" not in options:
            sub.add_argument("--no-color", action="store_true", help="no colour, even on a terminal (also NO_COLOR=1)")
        if "--debug" not in options:
            sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                             help="show tracebacks of internal errors")
        for action in sub._actions:
            _with_default(action)
