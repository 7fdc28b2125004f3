"""The library calls the script walk knows, by their canonical names (names.canonical): what starts processes,
what makes a DataLoader, a Trainer or a start-method context, what calls the function it is given, what iterates
its argument, and which torch.cuda functions leave CUDA uninitialised."""

from __future__ import annotations

from typing import Optional

# Calls that start worker processes as soon as they are made.
STARTERS = {
    "torch.multiprocessing.spawn": "spawn",
    "torch.multiprocessing.start_processes": "spawn",
    "multiprocessing.Pool": "default",
    "multiprocessing.Manager": "default",
    "concurrent.futures.ProcessPoolExecutor": "default",
    "torch.distributed.launcher.elastic_launch": "spawn",
    "nemo_run.run": "spawn",
    "nemo_run.Experiment": "spawn",
    "nemo_run.cli.main": "spawn",
}
PROCESS_CLASSES = {"multiprocessing.Process"}
DATALOADERS = {"torch.utils.data.DataLoader", "torch_geometric.loader.DataLoader", "monai.data.DataLoader"}
LIGHTNING_TRAINERS = {"lightning.Trainer"}
LIGHTNING_RUNS = {"fit", "validate", "test", "predict", "tune"}
HF_RUNS = {"train", "evaluate", "predict"}
# Functions that call the function they are given (a CLI wrapper around `main`).
CALLS_ITS_ARGUMENT = {"fire.Fire", "typer.run", "tyro.cli", "absl.app.run", "jsonargparse.CLI", "jsonargparse.auto_cli",
                      "defopt.run", "plac.call", "tensorflow.compat.v1.app.run"}
# Builtins that iterate their argument right away.
CONSUMERS = {"list", "tuple", "next", "sorted", "set", "sum", "any", "all", "dict", "iter", "max", "min"}
# Calls that wrap an iterable: iterating them iterates their arguments.
WRAPPERS = {"enumerate", "zip", "iter", "tqdm", "islice", "chain", "cycle", "tqdm.tqdm", "tqdm.auto.tqdm",
            "itertools.islice", "itertools.chain", "itertools.cycle", "rich.progress.track", "track"}
# torch.cuda functions that do not initialise CUDA.
CUDA_LAZY = {"manual_seed", "manual_seed_all", "is_initialized", "seed", "seed_all", "set_rng_state",
             "set_rng_state_all", "_lazy_call", "is_built"}
CUDA_LAZY_PREFIXES = ("torch.cuda.amp.", "torch.cuda.nvtx.")
SPAWN_METHODS = ("spawn", "forkserver")
BUILTIN_NAMES = {"list", "tuple", "next", "sorted", "set", "sum", "any", "all", "dict", "iter", "enumerate", "zip",
                 "max", "min", "super", "print"}
CALL_KINDS = {"multiprocessing.get_context": "mp_context", "lightning.Fabric": "lightning",
              "threading.Thread": "thread", "torch.device": "device"}


def call_kind(target: str) -> Optional[str]:
    """Which `Values.made_<kind>` knows the value a call of `target` makes; None for other calls."""
    for kind, names in (("process", PROCESS_CLASSES), ("dataloader", DATALOADERS), ("lightning", LIGHTNING_TRAINERS)):
        if target in names:
            return kind
    if _is_hf_trainer(target):
        return "hf_trainer"
    return "hf_args" if _is_hf_arguments(target) else CALL_KINDS.get(target)


def initialises_cuda(name: str) -> bool:
    """Whether a torch.cuda function (not a submodule's) initialises CUDA."""
    short = name[len("torch.cuda."):]
    return not (short in CUDA_LAZY or name.startswith(CUDA_LAZY_PREFIXES) or "." in short)


def _is_hf_trainer(name: str) -> bool:
    return name.startswith(("transformers.", "trl.")) and name.endswith("Trainer")


def _is_hf_arguments(name: str) -> bool:
    return name.startswith(("transformers.", "trl.")) and (name.endswith("TrainingArguments")
                                                            or name.endswith("Config") and name.startswith("trl."))
