"""Faults injected into gpudoctor's benchmarks from the test side, for tests that run the real CLI.

Python imports `sitecustomize` at start-up from the path; tests put this folder on PYTHONPATH of the command
they run, so every process of that command (the CLI and each spawned rank) gets the fault, and the production
code carries no hook:

* GPUDOCTOR_TEST_CORRUPT_RANK=R: rank R adds 1 to its `bench nccl` input after the pattern is written;
* GPUDOCTOR_TEST_FAIL_RANK=R: rank R raises RuntimeError("injected fault") as its `bench nccl` sweep starts;
* GPUDOCTOR_TEST_NAN_STEP=K: the `bench train` model's output is multiplied by NaN at step K (0-based);
* GPUDOCTOR_TEST_HANG_RULE=ID: describing rule ID (`explain`, the MCP server's explain_rule) never returns;
* GPUDOCTOR_TEST_SIGNAL_AT=early|late, GPUDOCTOR_TEST_SIGNAL=INT|TERM: the signal arrives while the command line
  loads (early) or once the command is done, while its children are cleaned up (late).
"""

import os


def _corrupt(rank: int) -> None:
    from gpudoctor.bench import nccl

    fill = nccl.fill_input

    def corrupted(torch, op, inp, world, me):
        fill(torch, op, inp, world, me)
        if me == rank:
            inp += 1.0

    nccl.fill_input = corrupted


def _fail(rank: int) -> None:
    from gpudoctor.bench import nccl

    sweep = nccl.sweep

    def failing(device, config):
        import torch.distributed as dist

        if dist.get_rank() == rank:
            raise RuntimeError("injected fault")
        return sweep(device, config)

    nccl.sweep = failing


def _nan_at(step: int) -> None:
    from gpudoctor.bench import train

    build = train.build_model

    def poisoned(torch, config):
        model = build(torch, config)
        calls = []

        def hook(module, inputs, output):
            calls.append(1)
            return output * float("nan") if len(calls) == step + 1 else output

        model.register_forward_hook(hook)
        return model

    train.build_model = poisoned


def _hang_on(rule_id: str) -> None:
    import threading

    from gpudoctor import api

    describe = api.describe_rule

    def hanging(asked, *args, **kwargs):
        if asked == rule_id:
            threading.Event().wait()
        return describe(asked, *args, **kwargs)

    api.describe_rule = hanging


def _signal_at(when: str, name: str) -> None:
    import signal
    import sys

    signum = getattr(signal, f"SIG{name}")
    if when == "early":
        class Interrupting:  # a finder that sends the signal as gpudoctor's command modules load
            def find_spec(self, fullname, path=None, target=None):
                if fullname == "gpudoctor.cli.guard":
                    sys.meta_path.remove(self)
                    signal.raise_signal(signum)
                return None

        sys.meta_path.insert(0, Interrupting())
        return
    from gpudoctor.probes import command

    kill_all = command.kill_all

    def interrupted_after():
        kill_all()
        signal.raise_signal(signum)

    command.kill_all = interrupted_after


if os.environ.get("GPUDOCTOR_TEST_CORRUPT_RANK"):
    _corrupt(int(os.environ["GPUDOCTOR_TEST_CORRUPT_RANK"]))
if os.environ.get("GPUDOCTOR_TEST_FAIL_RANK"):
    _fail(int(os.environ["GPUDOCTOR_TEST_FAIL_RANK"]))
if os.environ.get("GPUDOCTOR_TEST_NAN_STEP"):
    _nan_at(int(os.environ["GPUDOCTOR_TEST_NAN_STEP"]))
if os.environ.get("GPUDOCTOR_TEST_HANG_RULE"):
    _hang_on(os.environ["GPUDOCTOR_TEST_HANG_RULE"])
if os.environ.get("GPUDOCTOR_TEST_SIGNAL_AT"):
    _signal_at(os.environ["GPUDOCTOR_TEST_SIGNAL_AT"], os.environ.get("GPUDOCTOR_TEST_SIGNAL", "INT"))
