"""The MCP prompts: guided workflows an assistant offers its user ("my multi-node job hangs"), each one message that
tells the assistant which of gpudoctor's tools to chain, in what order, and how to report what they find. The
arguments are the user's paths, quoted into the message as given (the tools check them)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

Paths = Annotated[str, Field(max_length=4096, description=(
    "Files or folders, separated by commas or spaces (optional: the assistant asks for them)."))]

REPORTING = ("Report each finding with its rule ID, the evidence line or number it quotes and its fix, the errors "
             "first; a rule gpudoctor could not judge (unknown) is not a pass: say what was missing and how to get "
             "it. Call explain_rule when I ask why a rule matters.")


def _given(paths: str, what: str) -> str:
    return f"{what}: {paths}." if paths.strip() else f"Ask me for {what} if you need them."


def multi_node_hang(logs: Paths = "", job_files: Paths = "") -> str:
    """My multi-node job hangs or times out."""
    return " ".join((
        "My multi-node training job hangs or times out (in NCCL, in the rendezvous, or at the first collective).",
        "Use gpudoctor to find which node, rank or link is at fault:",
        "1. Call diagnose_text with every rank's and node's logs together (NCCL INFO/WARN lines from a run with",
        "NCCL_DEBUG=INFO, the torchrun or SLURM output, kernel Xid lines). " + _given(logs, "the logs"),
        "2. If I have a `gpudoctor snapshot` of each node, give them all to diagnose_text at once: it compares the",
        "nodes as a fleet (drivers, NCCL versions, network interfaces, GPUs that differ).",
        "3. Call lint_files on the job files (sbatch script, Kubernetes manifest, .env) for the NCCL variables and",
        "how the ranks are launched. " + _given(job_files, "the job files"),
        "Start from the first failure in time: the first rank to fail is the cause, the others' timeouts follow.",
        REPORTING,
    ))


def node_ready(script: Paths = "", model: Annotated[str, Field(max_length=4096, description=(
        "A model size (7B) or a Hugging Face config.json, to check that it fits (optional)."))] = "") -> str:
    """Is this node ready for training?"""
    steps = ["Is the machine this server runs on ready for GPU training? Use gpudoctor:",
             "1. Call check_machine (driver, GPUs and their health, CUDA, nvcc, torch and DeepSpeed, shared memory,",
             "limits, network)" + (f" with the training script {script}" if script.strip() else "") + "."]
    if model.strip():
        steps.append(f"2. Call estimate_memory with model {model} to see whether training fits this node's GPUs.")
    steps += ["Give a verdict: ready, ready with warnings, or not ready, with the blocking findings first.",
              "To measure the GPUs and their links, tell me to run `gpudoctor bench nccl` and `gpudoctor bench "
              "train` on the node (the tools never run a benchmark).", REPORTING]
    return " ".join(steps)


def slow_run(logs: Paths = "", job_files: Paths = "") -> str:
    """Why is my training run slow?"""
    return " ".join((
        "My training run is slower than it should be. Use gpudoctor to find why:",
        "1. Call lint_files on the job files and the training script: debugging switches left on",
        "(CUDA_LAUNCH_BLOCKING, NCCL_DEBUG=INFO), NCCL settings that pin a slow path, data-loader workers, how",
        "the ranks are placed. " + _given(job_files, "the job files and script"),
        "2. Call diagnose_text with the run's logs: NCCL's transport lines show whether it fell back to sockets",
        "instead of InfiniBand or NVLink. " + _given(logs, "the logs"),
        "3. Call check_machine for the GPUs, their links (P2P) and the host.",
        "Then tell me which benchmark would confirm it (`gpudoctor bench nccl` for the collectives, `gpudoctor",
        "bench train` for a training step) and what figure to expect.",
        REPORTING,
    ))


def review_job_folder(folder: Annotated[str, Field(min_length=1, max_length=4096, description=(
        "The folder holding the job files (sbatch scripts, manifests, Dockerfiles, .env, DeepSpeed configs, "
        "training scripts)."))]) -> str:
    """Review this job folder before I submit it."""
    return " ".join((
        f"Review the job files in {folder} before I submit the job. Use gpudoctor:",
        f"1. Call lint_files with paths [\"{folder}\"] (what .gitignore names and data files are skipped).",
        "2. For each .env file with findings, call preview_fix to show me the diff `gpudoctor fix` would write.",
        "3. If a DeepSpeed config and a model are there, call estimate_memory with them to check the memory.",
        "If the walk was cut (GD003 'not all read'), say which folders were not read.",
        REPORTING,
    ))


PROMPTS = (multi_node_hang, node_ready, slow_run, review_job_folder)
TITLES = {
    "multi_node_hang": "My multi-node job hangs", "node_ready": "Is this node ready for training?",
    "slow_run": "Why is my run slow?", "review_job_folder": "Review this job folder",
}
