"""Log lines as evidence for rules that otherwise judge the machine (check --from LOG).

A rule decorated with ``@or_from_log(describe)`` runs as before; where its facts are unknown or it finds nothing,
the failure lines the log reader recorded (``logs.events``, gpudoctor.ingest.logs) make it fire instead, with
the line and where it is as evidence. The log proves the symptom; the machine's facts, when given, say more.
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, List

from gpudoctor.facts import MissingFact


def log_events(facts, *kinds: str) -> List[dict]:
    """The events of these kinds the logs hold (none when no log was given)."""
    events = facts.get("logs.events", None) or []
    return [e for e in events if isinstance(e, dict) and (not kinds or e.get("kind") in kinds)]


def log_count(facts, kind: str) -> int:
    """How many lines of this kind the logs hold (events beyond the kept ones are counted only)."""
    return int((facts.get("logs.counts", None) or {}).get(kind, 0))


def cited(event: dict) -> dict:
    """Evidence for a finding: where the line is and the line itself."""
    return {"log": event.get("where"), "line": event.get("line")}


def or_from_log(describe: Callable[..., Iterable]) -> Callable:
    """Let a machine rule fire from log evidence (`describe(facts, rule)`) where its own facts say nothing."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def check(facts, rule):
            try:
                found = list(fn(facts, rule) or ())
            except MissingFact:
                logged = list(describe(facts, rule))
                if logged:
                    return logged
                raise
            return found or list(describe(facts, rule))

        return check

    return wrap


# --- the describers, one per machine rule --------------------------------------------------------------------

def driver_too_old_in_log(facts, rule):
    for event in log_events(facts, "driver_insufficient", "forward_compat_unsupported")[:1]:
        if event["kind"] == "forward_compat_unsupported":
            message = ("the log shows CUDA error 804: the CUDA forward-compatibility package was used on a GPU that "
                       "does not support it (only data-center GPUs do), so this driver is too old for the CUDA "
                       "runtime in use")
            how = ("Upgrade the NVIDIA driver to one that supports the job's CUDA version natively, or use a torch / "
                   "container image built for the CUDA version the driver supports (`nvidia-smi` shows it).")
        else:
            message = "the log shows the driver is too old for the CUDA runtime the job uses"
            how = ("Compare `nvidia-smi` (the driver's CUDA version) with the job's CUDA runtime (torch.version.cuda, "
                   "or the container's CUDA): upgrade the driver, or use a torch/container built for an older CUDA. "
                   "`gpudoctor check --from` on the node's `nvidia-smi` output names the versions.")
        yield rule.finding(f"{message}: {event['line']}", evidence=cited(event), fix=rule.fix(how))


def nvcc_torch_mismatch_in_log(facts, rule):
    for event in log_events(facts, "cuda_mismatch")[:1]:
        nvcc, torch_cuda = event.get("nvcc"), event.get("torch_cuda")
        versions = f" (CUDA {nvcc} installed, torch built with {torch_cuda})" if nvcc and torch_cuda else ""
        yield rule.finding(
            f"DeepSpeed refused to build its ops: the CUDA toolkit (nvcc) differs from torch's CUDA{versions}",
            evidence={**cited(event), "nvcc": nvcc, "torch_cuda": torch_cuda},
            fix=rule.fix(f"Install the CUDA {torch_cuda or 'torch'} toolkit and point CUDA_HOME at it (conda: "
                         f"`conda install -c \"nvidia/label/cuda-{torch_cuda or 'X.Y'}.0\" cuda-toolkit`), or install "
                         "a torch built for the installed CUDA."))


def gpu_arch_not_in_torch_in_log(facts, rule):
    for event in log_events(facts, "no_kernel_image")[:1]:
        which = f"{event['gpu']} ({event['sm']}) " if event.get("gpu") else "this GPU "
        yield rule.finding(
            f"the log shows torch has no kernels for {which}: {event['line']}",
            evidence=cited(event),
            fix=rule.fix("Install a torch wheel built for this GPU's architecture (`python -c 'import torch; "
                         "print(torch.cuda.get_arch_list(), torch.cuda.get_device_capability())'` shows both): a newer "
                         "CUDA build for new GPUs (cu128+ for Blackwell), cu126 or older for Volta and older."))


def driver_unusable_in_log(facts, rule):
    for event in log_events(facts, "nvml_mismatch", "driver_missing")[:1]:
        if event["kind"] == "nvml_mismatch":
            what = "the NVIDIA kernel module and user-space library differ (driver upgraded without a reboot)"
            how = "Reboot the node, or reload the NVIDIA kernel modules with no GPU process running."
        else:
            what = "the job could not reach an NVIDIA driver"
            how = ("Check `nvidia-smi` on the node; in a container, run it with the NVIDIA runtime "
                   "(`--gpus all`); otherwise load the driver (`sudo modprobe nvidia`, `dmesg | grep -i nvidia`).")
        yield rule.finding(f"{what}: {event['line']}", evidence=cited(event), fix=rule.fix(how))


def shm_too_small_in_log(facts, rule):
    events = log_events(facts, "shm_failure")
    if events:
        event = events[0]
        yield rule.finding(
            f"the log shows shared memory (/dev/shm) ran out: {event['line']}",
            evidence={**cited(event), "times": log_count(facts, "shm_failure")},
            fix=rule.fix("Give the container more shared memory: `docker run --ipc=host` (or `--shm-size=16g`); in "
                         "Kubernetes mount an `emptyDir: {medium: Memory}` volume at /dev/shm; or lower the "
                         "DataLoader's num_workers."))


def memlock_too_low_in_log(facts, rule):
    for event in log_events(facts, "ibv_reg_mr")[:1]:
        yield rule.finding(
            f"the log shows NCCL could not register (pin) memory for RDMA: {event['line']}",
            evidence=cited(event),
            fix=rule.fix("Raise the locked-memory limit to unlimited: `ulimit -l unlimited` in the job, "
                         "`--ulimit memlock=-1` for Docker, `* - memlock unlimited` in /etc/security/limits.conf (and "
                         "restart slurmd so jobs inherit it)."))


def missing_main_guard_in_log(facts, rule):
    for event in log_events(facts, "spawn_bootstrap")[:1]:
        script = event.get("script")
        where = f" ({script}, line {event.get('script_line')}, runs at module level)" if script else ""
        yield rule.finding(
            f"the log shows a process was started while the script was still being imported{where}: "
            f"{event['line']}",
            evidence={**cited(event), "script": script, "script_line": event.get("script_line")},
            fix=rule.fix("Move the code that starts processes (DataLoader iteration with workers, mp.spawn, Pool) "
                         "into `def main():` and call it under `if __name__ == \"__main__\":`"
                         + (f"; `gpudoctor check --script {script}` shows the call path." if script else ".")))
