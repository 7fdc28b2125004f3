"""Memory failures in a log, read for the log reader (gpudoctor.ingest.logs): torch's CUDA out-of-memory error with
the numbers it gives, the host's OOM killer in each form the kernel, cgroups, SLURM, Kubernetes and Docker print it,
a process killed by SIGKILL, and shared memory running out (docs/logs.md).

Each reader takes the log reader (`scan`) and the line it is reading, and records at most one event for the line.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Dict, Optional, Tuple

from .log_reader import LogReader

_OOM_TORCH = re.compile(r"Tried to allocate ([\d.]+ [KMGT]?i?B)")
_OOM_GPU = re.compile(r"GPU ?(\d{1,3})")
# a number starts only where its run of digits starts: one try per run, linear in the line (a line of 20,000
# digits tried every position of the run: quadratic)
_OOM_TOTAL = re.compile(r"(?<![\d.])([\d.]+ [KMGT]?i?B) total capacity|total capacity of ([\d.]+ [KMGT]?i?B)")
_OOM_FREE = re.compile(r"(?<![\d.])([\d.]+ [KMGT]?i?B) free|of which ([\d.]+ [KMGT]?i?B) is free")
# torch 2.1+ lists the processes NVML sees on the GPU: `Process 7478 has 4.08 GiB memory in use.` for the others,
# `Including non-PyTorch memory, this process has …` for itself. Without that clause torch did not find itself (a
# container's PID namespace), so a `Process N` may be the job itself and none is taken as another process.
_OOM_OTHER = re.compile(r"Process (\d{1,10}) has ([\d.]{1,10} [KMGT]?i?B) memory in use")
# torch 1.x-2.0: `(GPU 0; 11.17 GiB total capacity; 505.96 MiB already allocated; 12.50 MiB free; 530.00 MiB reserved in
# total by PyTorch)`: what is neither free nor PyTorch's is held outside its cache
_OOM_RESERVED = re.compile(r"([\d.]{1,10} [KMGT]?i?B) reserved in total by PyTorch")
_EXITCODE_9 = re.compile(r"exitcode\s*:?\s*-9\b(?:.{0,40}?local_rank:? ?(\d{1,6}))?(?:.{0,40}?pid:? ?(\d{1,10}))?")
# the shell's report of a child it lost to SIGKILL: `bash: line 1: 4242 Killed   python train.py`, job control's
# `[1]+  Killed   python train.py`, or `Killed` written after a progress bar that had no newline (`…it/s]Killed`)
_SHELL_KILLED = re.compile(r"\d{1,10} Killed\s+\S|^\[\d{1,4}\][+-]?\s+Killed\s+\S|\]Killed\.?$")
_SIGKILL_WORDS = ("Signals.SIGKILL", "Signal 9 (SIGKILL)", "signal 9 (SIGKILL)", "killed by signal: Killed")
# The memory evidence a log can hold (docs/logs.md; each form as the kernel, SLURM and Kubernetes print it):
# `Out of memory: Killed process 14750 (python3) total-vm:…kB, anon-rss:…kB` (also after `Memory cgroup out of
# memory:`; older kernels: `Killed process 28438 (java), UID 0, total-vm:…, anon-rss:…` after `Kill process … or
# sacrifice child`)
_KILLED_PROCESS = re.compile(r"Killed process (\d{1,10}) \(([^)]{1,64})\)(?:.{0,60}?total-vm:\d+kB)?"
                             r"(?:.{0,40}?anon-rss:(\d+)kB)?")
_KILL_PROCESS = re.compile(r"out of memory: Kill process (\d{1,10}) \(([^)]{1,64})\)")
# `oom-kill:constraint=CONSTRAINT_MEMCG,…,task=python3,pid=14750,uid=1000`
_OOM_KILL_SUMMARY = re.compile(r"oom-kill:constraint=(CONSTRAINT_\w{1,20})"
                               r"(?:.{0,600}?,task=([^,]{1,64}),pid=(\d{1,10}))?")
_INVOKED = re.compile(r"(\S{1,64}) invoked oom-killer:")
_MEMORY_EVENTS = re.compile(r"^oom_kill (\d{1,12})$")  # cgroup memory.events (v2) / memory.oom_control (v1)
# slurmstepd: `Detected 1 oom-kill event(s) in StepId=191.batch cgroup.` (older: `in step 3495064.0 cgroup`;
# newer: `Detected 2 oom_kill events in StepId=1234.13. Some of the step tasks have been OOM Killed.`)
_SLURM_OOM = re.compile(r"Detected (\d{1,9}) oom[-_]kill events?(?:\(s\))? "
                        r"in (?:StepId=|step )([\w.]{1,40}?)\.?(?: |$)")
_SRUN_OOM = re.compile(r"srun: error: ([\w.\-]{1,200}): tasks? ([\d\-,]{1,40}): Out Of Memory")
# Kubernetes: `Reason:       OOMKilled` (kubectl describe), `"reason": "OOMKilled"`, a STATUS column; Docker's
# `"OOMKilled": true` (never its `false`)
_K8S_OOM = re.compile(r"(?:Reason:\s{1,40}OOMKilled\b|\"reason\":\s?\"OOMKilled\""
                      r"|\s\d{1,3}/\d{1,3}\s{1,40}OOMKilled\s)")


def _group(m: Optional[re.Match[str]], *groups: int) -> Optional[str]:
    """The first of `groups` the match found (None without a match or a group)."""
    return next((m.group(g) for g in groups if m.group(g)), None) if m else None


def _number(text: Optional[str]) -> Optional[int]:
    return int(text) if text else None


def cuda_oom(scan: LogReader, name: str, where: str, line: str) -> None:
    """torch's `CUDA out of memory. Tried to allocate … (GPU 0; … total capacity; … free; …)`, all its wordings."""
    if "CUDA out of memory" not in line and "CUDA error: out of memory" not in line \
            and "OutOfMemoryError" not in line:
        return
    gpu = _OOM_GPU.search(line[line.find("allocate"):]) if "allocate" in line else None
    others = _OOM_OTHER.findall(line) if "this process has" in line else []
    scan.event(name, "cuda_oom", where, line, source="torch",
               tried=_group(_OOM_TORCH.search(line), 1), gpu=_number(_group(gpu, 1)),
               total=_group(_OOM_TOTAL.search(line), 1, 2), free=_group(_OOM_FREE.search(line), 1, 2),
               other_processes=[{"pid": int(pid), "used": used} for pid, used in others[:8]] or None,
               reserved=_group(_OOM_RESERVED.search(line), 1))


def sigkill(scan: LogReader, name: str, where: str, line: str) -> None:
    """A process killed by SIGKILL: torchrun's `exitcode: -9`, Python's and the shell's words for it."""
    m = _EXITCODE_9.search(line)
    if m:
        scan.event(name, "sigkill", where, line, local_rank=_number(m.group(1)), pid=_number(m.group(2)))
    elif any(word in line for word in _SIGKILL_WORDS) or line in ("Killed", "Killed.") or _SHELL_KILLED.search(line):
        scan.event(name, "sigkill", where, line)


_Fields = Optional[Dict[str, Any]]


def _killed_process(line: str, kernel: str) -> _Fields:
    m = _KILLED_PROCESS.search(line)
    if not m or ("out of memory" not in line.lower() and "total-vm:" not in line):
        return None
    return {"source": kernel, "pid": int(m.group(1)), "process": m.group(2), "rss_kib": _number(m.group(3))}


def _kill_process(line: str, kernel: str) -> _Fields:
    m = _KILL_PROCESS.search(line)
    return {"source": kernel, "process": m.group(2)} if m else None


def _invoked(line: str, kernel: str) -> _Fields:
    m = _INVOKED.search(line)
    return {"source": "kernel", "process": m.group(1)} if m else None


def _summary(line: str, kernel: str) -> _Fields:
    m = _OOM_KILL_SUMMARY.search(line)
    return {"source": kernel, "constraint": m.group(1), "process": m.group(2), "pid": _number(m.group(3))} if m \
        else None


def _memory_events(line: str, kernel: str) -> _Fields:
    m = _MEMORY_EVENTS.match(line) if line.startswith("oom_kill ") else None
    return {"source": "cgroup", "count": int(m.group(1))} if m and int(m.group(1)) > 0 else None


def _slurm(line: str, kernel: str) -> _Fields:
    m = _SLURM_OOM.search(line)
    return {"source": "slurm", "count": int(m.group(1)), "step": m.group(2)} if m else None


def _srun(line: str, kernel: str) -> _Fields:
    m = _SRUN_OOM.search(line)
    return {"source": "slurm", "host": m.group(1), "task": m.group(2)} if m else None


def _container(line: str, kernel: str) -> _Fields:
    if "OOMKilled" in line and (_K8S_OOM.search(line) or '"OOMKilled": true' in line or '"OOMKilled":true' in line):
        return {"source": "docker" if '"OOMKilled"' in line else "kubernetes"}
    return None


# Each form of the OOM killer's evidence, tried in order: (the line, "cgroup" or "kernel": whose limit the line
# says was hit) → the event's fields, or None where the line is not that form.
_OOM_FORMS: Tuple[Callable[[str, str], _Fields], ...] = (
    _killed_process, _kill_process, _invoked, _summary, _memory_events, _slurm, _srun, _container)


def oom_killer(scan: LogReader, name: str, where: str, line: str) -> None:
    """Memory evidence: the OOM killer's own lines, a cgroup's oom_kill count, SLURM's and Kubernetes' words."""
    kernel = "cgroup" if "Memory cgroup out of memory" in line or "CONSTRAINT_MEMCG" in line else "kernel"
    for form in _OOM_FORMS:
        fields = form(line, kernel)
        if fields is not None:
            scan.event(name, "oom_killer", where, line, **fields)
            return


def shm(scan: LogReader, name: str, where: str, line: str) -> None:
    """Shared memory run out: a DataLoader worker's SIGBUS (older torch says only that), `/torch_…` files."""
    low = line.lower()
    if ("bus error" in low and ("shared memory" in low or "dataloader worker" in low)) \
            or "out of shared memory" in low \
            or ("unable to write to file </torch_" in line) \
            or ("No space left on device" in line and "/torch_" in line):
        scan.event(name, "shm_failure", where, line)
