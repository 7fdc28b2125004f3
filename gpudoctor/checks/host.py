"""GD5xx: host limits and GPU health — shared memory, locked memory, busy and failing GPUs."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.devices import is_mig, job_gpus, mig_without_instances, require_count
from gpudoctor.facts.log_evidence import cited, log_count, log_events
from gpudoctor.knowledge import table
from gpudoctor.model import Severity
from gpudoctor.units import GiB, MiB, size
from gpudoctor.units import parse as size_of

SHM_MINIMUM = 1 * GiB  # Docker's 64 MiB default and 512 MiB pods fail DataLoader workers and NCCL's SHM transport


def shm_too_small_in_log(facts, rule):
    events = log_events(facts, "shm_failure")
    if events:
        event = events[0]
        yield rule.finding(
            f"the log shows shared memory (/dev/shm) ran out: {event['line']}",
            evidence={**cited(event), "times": log_count(facts, "shm_failure")},
            fix=rule.fix())


@check("GD503", from_log=shm_too_small_in_log)
def shm_too_small(facts, rule):
    shm = facts.get("host.shm_bytes")
    if shm is None or shm >= SHM_MINIMUM:
        return
    docker = " (Docker's default)" if 60 * MiB <= shm <= 68 * MiB else ""
    yield rule.finding(
        f"/dev/shm is {size(shm)}{docker}: DataLoader workers fail with 'Bus error' / 'insufficient shared memory "
        "(shm)' and NCCL's shared-memory transport runs out",
        evidence={"shm_bytes": shm, "minimum_bytes": SHM_MINIMUM},
        fix=rule.fix())


def _pinned_memory_users(facts) -> list:
    """What on this host needs locked memory: RDMA devices, EFA, DeepSpeed pinned offload."""
    devices = [d["name"] for d in facts.get("host.ib_devices", [])]
    more = "…" if len(devices) > 2 else ""
    users = [f"{len(devices)} RDMA device(s) ({', '.join(devices[:2])}{more})"] if devices else []
    if (facts.env("FI_PROVIDER") or "").lower() == "efa":
        users.append("EFA (FI_PROVIDER=efa)")
    return users


def memlock_too_low_in_log(facts, rule):
    for event in log_events(facts, "ibv_reg_mr")[:1]:
        yield rule.finding(
            f"the log shows NCCL could not register (pin) memory for RDMA: {event['line']}",
            evidence=cited(event),
            fix=rule.fix())


@check("GD505", from_log=memlock_too_low_in_log)
def memlock_too_low(facts, rule):
    limit = facts.get("host.ulimit_memlock")
    if limit is None:
        return  # unlimited
    users = _pinned_memory_users(facts)
    if not users:
        return
    yield rule.finding(
        f"ulimit -l (locked memory) is {size(limit)} while {' and '.join(users)} need pinned memory: NCCL fails "
        "with 'Cannot allocate memory' / ibv_reg_mr errors or falls back to sockets",
        evidence={"ulimit_memlock_bytes": limit, "users": users},
        fix=rule.fix())


def is_compute_process(process: dict) -> bool:
    """Type `C` or `C+G` in a pasted nvidia-smi; no type (the live probe lists NVML's compute processes only).
    A `G` process alone (Xorg, gnome-shell) is the desktop, not a job competing for the GPU."""
    return "C" in str(process.get("type") or "C").upper()


def _occupants(device: dict):
    """(processes holding memory on a GPU or MIG device, bytes they hold). In MIG mode NVML gives no per-process
    memory: then the device's used memory is what its processes hold."""
    processes = [p for p in device.get("processes", []) if is_compute_process(p)]
    busy = [p for p in processes if (p.get("used_bytes") or 0) > 0]
    if busy:
        return busy, sum(p["used_bytes"] for p in busy)
    unmeasured = [p for p in processes if p.get("used_bytes") is None]
    if unmeasured and is_mig(device) and (device.get("memory_used_bytes") or 0) > 0:
        return unmeasured, device["memory_used_bytes"]
    return [], 0


def occupied_in_log(facts, rule):
    """torch's out-of-memory message names the other processes holding memory on that GPU (torch 2.1 and later), or
    shows most of it neither free nor reserved by PyTorch (torch 1.x-2.0: total − free − reserved)."""
    for event in log_events(facts, "cuda_oom"):
        others = event.get("other_processes")
        if others:
            who = ", ".join(f"pid {p.get('pid')} {p.get('used')}" for p in others[:3])
            yield rule.finding(
                f"when GPU {event.get('gpu', '?')} ran out of memory, other processes held memory on it ({who}): "
                f"{event['line']}", evidence={**cited(event), "processes": others}, fix=rule.fix())
            return
        total, free, reserved = (size_of(event.get(key)) for key in ("total", "free", "reserved"))
        if total is None or free is None or reserved is None:
            continue
        outside = total - free - reserved
        if outside > max(2 * GiB, total // 4):  # more than a CUDA context, cuBLAS/cuDNN workspaces and NCCL take
            yield rule.finding(
                f"when GPU {event.get('gpu', '?')} ran out of memory, {size(outside)} of its {size(total)} was "
                f"neither free nor reserved by PyTorch ({event['reserved']}): most likely other processes held it: "
                f"{event['line']}", evidence={**cited(event), "outside_bytes": outside}, fix=rule.fix())
            return


@check("GD502", from_log=occupied_in_log)
def gpu_memory_occupied(facts, rule):
    facts.get("nvml.gpus")  # unknown without NVML
    job = job_gpus(facts)
    # a GPU whose processes were not listed (collect_env, nvidia-smi -L) says nothing, unless no memory is in use
    unlisted = [gpu for gpu in job.devices if "processes" not in gpu and gpu.get("memory_used_bytes") != 0]
    found = False
    for gpu in job.devices:
        busy, held = _occupants(gpu)
        if not busy:
            continue
        found = True
        who = ", ".join(f"pid {p.get('pid')} {p.get('name') or ''} {size(p['used_bytes'])}".replace("  ", " ")
                        if p.get("used_bytes") else f"pid {p.get('pid')} {p.get('name') or ''}".strip()
                        for p in busy[:3])
        yield rule.finding(
            f"GPU {gpu.get('index')} ({gpu.get('name')}) has {size(held)} held by other processes ({who}): the job "
            f"gets less memory and shares the GPU's compute{job.note()}",
            evidence={"gpu": gpu.get("index"), "uuid": gpu.get("uuid"), "held_bytes": held, "mapping": job.basis,
                      "processes": [{"pid": p.get("pid"), "name": p.get("name")} for p in busy]},
            fix=rule.fix())
    held = [gpu for gpu in job.devices if _held_by_no_listed_process(gpu)]
    if held and not found:
        yield _memory_without_process(facts, rule, held, job.note())
        return
    if unlisted and not found:
        raise MissingFact("nvml.gpus.processes", "which processes hold GPU memory is not known (nvidia-smi lists them)")


# More than a CUDA context and its libraries' workspaces take (about 0.3-1 GiB): memory someone's work holds
UNLISTED_FLOOR = GiB


def _held_by_no_listed_process(gpu: dict) -> bool:
    """A whole GPU whose process list was read and is empty ('No running processes found') while memory is in use:
    the processes of other containers (another PID namespace) are not listed, nor is a process that died holding it.
    MIG mode: NVML lists the MIG devices' processes, not the GPU's."""
    listed_none = gpu.get("processes") == [] or bool(gpu.get("processes_unnamed"))
    return (listed_none and not is_mig(gpu) and not gpu.get("mig_enabled")
            and (gpu.get("memory_used_bytes") or 0) > UNLISTED_FLOOR)


def _memory_without_process(facts, rule, gpus: list, note: str):
    """Memory in use that no listed process holds: information, a warning where the same log ran out of memory."""
    first = gpus[0]
    oom = log_events(facts, "cuda_oom")
    more = f" (and {len(gpus) - 1} more GPU(s))" if len(gpus) > 1 else ""
    return rule.finding(
        f"GPU {first.get('index')} ({first.get('name')}) has {size(first['memory_used_bytes'])} in use{more} but no "
        "process is listed on it: a process in another container (nvidia-smi lists only its own PID namespace's), "
        "or one that died holding the memory (a zombie)"
        + (f"; the job then ran out of memory: {oom[0].get('line')}" if oom else "") + note,
        severity=Severity.WARNING if oom else Severity.INFO,
        evidence={"gpus": [gpu.get("index") for gpu in gpus], "used_bytes": [gpu["memory_used_bytes"] for gpu in gpus],
                  **(cited(oom[0]) if oom else {})},
        fix=rule.fix(case="unlisted"))


def _nvml_error(gpu: dict) -> dict:
    """rules/nvml_errors.toml's entry for the code a GPU failed with (an unnamed code: an internal error)."""
    known = {entry["kind"]: entry for entry in table("nvml_errors")["error"]}
    return known.get(gpu["error_kind"], {"meaning": "an NVML error this version of gpudoctor does not name"})


def _failure(gpu: dict) -> str:
    """A broken GPU: which query failed, NVML's message, what the code means."""
    query = gpu.get("error_query")
    lost = ": look for Xid 79 in `dmesg`" if gpu["error_kind"] == "gpu_lost" else ""
    return (f"NVML's {query + ' ' if query else ''}query failed: {gpu.get('error') or gpu['error_kind']} "
            f"({_nvml_error(gpu)['meaning']}{lost})")


def _health_problems(gpu: dict) -> list:
    if gpu.get("error_kind"):  # the probe keeps an error only on a GPU that is broken (hidden ones are apart)
        return [_failure(gpu)]
    problems = []
    if gpu.get("ecc_uncorrected_volatile"):
        problems.append(f"uncorrectable ECC errors since the last reset: {gpu['ecc_uncorrected_volatile']}")
    if gpu.get("retired_pages_pending"):
        problems.append("a page retirement is pending (takes effect after a GPU reset)")
    if gpu.get("remapped_rows_pending"):
        problems.append("a row remap is pending (takes effect after a GPU reset)")
    if gpu.get("remapped_rows_failure"):
        problems.append("row remapping failed: the memory cannot be repaired")
    if mig_without_instances(gpu):
        problems.append("MIG mode is on but the GPU has no MIG instance: CUDA sees no device on it")
    return problems


def _mig_pending(gpu: dict) -> str:
    """A MIG mode set but not yet in effect (NVML's pending mode: it waits for a GPU reset), or ''."""
    if "mig_pending" not in gpu or bool(gpu["mig_pending"]) == bool(gpu.get("mig_enabled")):
        return ""
    return (f"MIG mode is {'on' if gpu.get('mig_enabled') else 'off'} and set to turn "
            f"{'on' if gpu['mig_pending'] else 'off'} at the next GPU reset")


def _health_fix(gpu: dict, rule):
    """A lost GPU needs a reboot, a failed row remap a replacement; a failing NVML query what its code calls for
    (rules/nvml_errors.toml's action); the other problems a reset."""
    index = {"index": gpu["index"]} if gpu.get("index") is not None else {}
    if gpu.get("error_kind") == "gpu_lost":
        return rule.fix(case="gpu_lost")
    if gpu.get("error_kind"):
        action = _nvml_error(gpu).get("action")
        return rule.fix(case="nvml_service" if action == "nvml_service" else "nvml_reboot" if action == "nvml_reboot"
                        else "nvml_reset", values=index)
    if gpu.get("remapped_rows_failure"):
        return rule.fix(case="remap_failed")
    if mig_without_instances(gpu):
        return rule.fix(case="mig_no_instance", values=index)
    return rule.fix(values=index)


_HEALTH = ("error_kind", "ecc_uncorrected_volatile", "retired_pages_pending", "remapped_rows_pending",
           "remapped_rows_failure")


def _health_unread(facts, gpus: list) -> list:
    """The GPUs a report only named (nvidia-smi -L, collect_env, an `env` command) and no other part of it read the
    health of. NVML's own NOT_SUPPORTED for a query (consumer GPUs have no ECC) is a reading: not one of these."""
    if facts.get("nvml.health_read", None) is not False:
        return []
    return [gpu for gpu in gpus if not any(key in gpu for key in _HEALTH)]


def _gpu_health(gpu: dict, rule):
    """One GPU's health problems (errors, ECC, retired pages, row remapping) or a MIG mode change that waits for a
    reset; None when it has neither."""
    problems = _health_problems(gpu)
    if problems:
        what = ", ".join(str(v) for v in (gpu.get("name"), gpu.get("uuid")) if v)
        return rule.finding(
            f"GPU {gpu.get('index')}{f' ({what})' if what else ''}: {'; '.join(problems)}",
            evidence={"gpu": gpu.get("index"), "uuid": gpu.get("uuid"), "problems": problems,
                      **({"nvml_error": gpu["error_kind"]} if gpu.get("error_kind") else {})},
            fix=_health_fix(gpu, rule))
    if _mig_pending(gpu):
        return rule.finding(
            f"GPU {gpu.get('index')} ({gpu.get('name')}): {_mig_pending(gpu)}; until then jobs see the GPU as it "
            "is now", evidence={"gpu": gpu.get("index"), "uuid": gpu.get("uuid"),
                                "mig_enabled": gpu.get("mig_enabled"), "mig_pending": gpu["mig_pending"]},
            fix=rule.fix(case="mig_pending", values={"index": gpu.get("index")}), severity=Severity.WARNING)
    return None


@check("GD506")
def gpu_unhealthy(facts, rule):
    gpus = facts.get("nvml.gpus")
    findings = [finding for finding in (_gpu_health(gpu, rule) for gpu in gpus) if finding is not None]
    allocated = _allocated(facts)
    working = [gpu for gpu in gpus if not gpu.get("error_kind")]  # a broken GPU is not one the job can use
    # from Slurm 21.08 gres.conf may list MIG devices as GPUs (gres.html, MIG Management): count them one by one; a
    # GPU in MIG mode with no instance counts none (CUDA sees no device on it)
    devices = sum(len(gpu["mig_devices"]) if gpu.get("mig_enabled") and "mig_devices" in gpu else 1
                  for gpu in working)
    # a report that named a GPU and not how many, or a probe cut short by a hung GPU, says nothing of a missing one:
    # unknown, unless what it did read is already a finding
    uncounted_beside_findings = facts.get("nvml.gpus_counted", None) is False and findings
    if allocated and allocated[0] > devices and not uncounted_beside_findings:
        require_count(facts)
        broken = len(gpus) - len(working)
        seen = f"{devices} working ({len(gpus)} listed, {broken} broken)" if broken else str(devices)
        findings.append(rule.finding(
            f"SLURM allocated {allocated[0]} GPUs on this node ({allocated[1]}) but NVML sees {seen}: a GPU is "
            "broken, has fallen off the bus or is hidden from the job",
            evidence={"expected": allocated[0], "seen": devices, "broken": broken},
            fix=rule.fix(case="missing_gpu")))
    unread = _health_unread(facts, gpus)
    if unread and not findings:
        which = "the GPU but not its" if len(unread) == 1 else "the GPUs but not their"
        raise MissingFact("nvml.gpus.health_read", f"the report names {which} ECC, page retirement or row remap state "
                                                   "(nvidia-smi's table and nvidia-smi -q state it)")
    return findings


def _allocated(facts):
    """(how many GPUs SLURM gave the job on this node, the variable that says so), or None outside SLURM. A job
    step has SLURM_GPUS_ON_NODE; a Prolog has only the GPU IDs (SLURM_JOB_GPUS: 0,1), one per GPU."""
    count = facts.env("SLURM_GPUS_ON_NODE")
    if count and count.isdigit():
        return int(count), f"SLURM_GPUS_ON_NODE={count}"
    for name in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS"):
        ids = facts.env(name)
        if ids and all(entry.strip().isdigit() for entry in ids.split(",")):
            return len(ids.split(",")), f"{name}={ids}"
    return None
