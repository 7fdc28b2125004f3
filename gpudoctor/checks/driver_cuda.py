"""GD1xx: the NVIDIA driver, the CUDA toolkit and the torch build against each other."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import List, Optional, Sequence, Tuple

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.cuda import require_torch, toolkit_version_at, torch_cuda
from gpudoctor.facts.devices import (
    HIDES_ALL,
    job_gpus,
    limit_mig,
    mig_dropped,
    mig_rule,
    named_devices,
    require_count,
    usable_gpus,
)
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.knowledge import (
    Release,
    companion,
    driver_max_cuda,
    gpu_cc,
    major_minor,
    min_driver,
    mvc_floor,
    releases_with_wheel,
    table,
    version,
    wheel_archs,
)
from gpudoctor.model import EnvChange, Severity


def driver_cuda(facts) -> Optional[str]:
    """The newest CUDA the driver supports: as reported, else derived from the driver version."""
    reported = facts.get("nvml.cuda_driver_version", None)
    if reported:
        return major_minor(reported)
    derived = driver_max_cuda(facts.get("nvml.driver_version", None))
    return str(derived) if derived else None


def driver_supports(driver: Optional[str], driver_cuda_version: Optional[str], runtime: str) -> Optional[bool]:
    """Whether a driver runs a CUDA `runtime` (exactly, or through minor-version compatibility). None: can't tell."""
    need = version(major_minor(runtime))
    have_cuda, have_driver = version(driver_cuda_version), version(driver)
    if need is None or (have_cuda is None and have_driver is None):
        return None
    if have_cuda is not None and have_cuda >= need:
        return True
    ga_driver = min_driver(runtime)
    if have_driver is not None and ga_driver is not None and have_driver >= ga_driver:
        return True
    floor = mvc_floor(need.major) if need.major >= 11 else None
    if floor is None:
        return False
    if have_driver is not None:
        return have_driver >= floor
    reported_floor = min_driver(str(have_cuda))  # the least driver that reports this CUDA version
    return (have_cuda is not None and have_cuda.major == need.major and reported_floor is not None
            and reported_floor >= floor)


def wheel_tag(cuda: str) -> str:
    return "cu" + cuda.replace(".", "")


def best_wheel_cuda(driver: Optional[str], driver_cuda_version: Optional[str], ccs: Sequence[str] = (),
                    torch_version: Optional[str] = None) -> Optional[str]:
    """The newest CUDA of an official torch wheel that this driver can run and whose kernels run every GPU of
    compute capability `ccs` (the wheel of the release `_pin` picks for the user's torch): one whose verified arch
    list leaves a GPU out is never chosen (CUDA 13 wheels dropped the GPUs before sm_75), one whose list is not
    verified only where no verified one fits."""
    candidates = {cuda for cuda in (major_minor(row["cuda"]) for row in table("torch_wheels").get("wheel", [])) if cuda}
    usable = [c for c in candidates if driver_supports(driver, driver_cuda_version, c)]
    have = version(driver_cuda_version or driver_max_cuda(driver))
    fits = {c: _wheel_fits(c, torch_version, ccs) for c in usable}
    ranked = [c for c in usable if fits[c] is not False]
    if not ranked:
        return None
    return max(ranked, key=lambda c: (fits[c] is True, have is not None and Release(c) <= have, Release(c)))


def _wheel_fits(cuda: str, torch_version: Optional[str], ccs: Sequence[str]) -> Optional[bool]:
    """Whether the wheel for `cuda` of the release `_pin` picks runs every GPU of `ccs` (True: its verified arch
    list says so; False: its verified list leaves one out; None: not known, or no GPU named)."""
    if not ccs:
        return None
    release = _pin(cuda, torch_version)[0]
    row = wheel_archs(release, cuda) if release else None
    if row is None or (row.get("status") != "verified" and "archs" not in row.get("verified", [])):
        return None
    sass = [f"sm_{a.replace('.', '')}" for a in row["archs"]]
    ptx = [f"compute_{a.replace('.', '')}" for a in row["ptx"]]
    if all(_runs(cc, sass) for cc in ccs):
        return True
    if row.get("status") == "verified":
        return all(_runs(cc, sass + ptx) for cc in ccs)
    return None if all(_runs(cc, sass + ptx) for cc in ccs) else False


def _pin(cuda: str, torch_version: Optional[str]) -> Tuple[Optional[str], str]:
    """(the torch release major.minor to install for `cuda`, its pip requirement): the user's own version where
    its release publishes that build, else the newest release that does not go past the user's (else the oldest
    after it) — never an unpinned jump to whatever the index has newest."""
    have = str(torch_version or "").split("+")[0]
    releases = releases_with_wheel(cuda)
    if have and major_minor(have) in releases:
        return major_minor(have), f"torch=={have}"
    if releases:
        mine = version(have)
        older = [r for r in releases if mine is None or Release(r) <= mine]
        release = older[-1] if older else releases[0]
        return release, f"torch=={release}.*"
    return None, "torch"


def _install_command(cuda: Optional[str], torch_version: Optional[str], facts=None) -> tuple:
    """Reinstall torch built for `cuda`, pinned (`_pin`), with the torchvision and torchaudio the facts show
    installed, each pinned to the release built for that torch (`[[companion]]` of rules/torch_wheels.toml; one
    the table does not know is left for pip to match)."""
    if not cuda:
        return ()
    release, pin = _pin(cuda, torch_version)
    words = [pin]
    for name in ("torchvision", "torchaudio"):
        if facts is not None and facts.get(f"torch.{name}", None):
            paired = companion(name, release) if release else None
            words.append(f"{name}=={paired}.*" if paired else name)
    return (f"pip install --force-reinstall {' '.join(shlex.quote(word) for word in words)} --index-url "
            f"https://download.pytorch.org/whl/{wheel_tag(cuda)}",)


def gpu_ccs(facts) -> List[str]:
    """The compute capabilities of the GPUs the facts list (none where none is known)."""
    gpus = facts.get("nvml.gpus", None) or facts.get("torch.devices", None) or []
    return sorted({cc for cc in (gpu_cc(gpu) for gpu in gpus if isinstance(gpu, dict)) if cc})


def driver_too_old_in_log(facts, rule):
    for event in log_events(facts, "driver_insufficient", "forward_compat_unsupported")[:1]:
        forward_compat = event["kind"] == "forward_compat_unsupported"
        message = ("the log shows CUDA error 804: the CUDA forward-compatibility package was used on a GPU that does "
                   "not support it (only data-center GPUs do), so this driver is too old for the CUDA runtime in use"
                   if forward_compat else "the log shows the driver is too old for the CUDA runtime the job uses")
        yield rule.finding(f"{message}: {event['line']}", evidence=cited(event), fix=rule.fix(
            case="log_forward_compat" if forward_compat else "log_driver_too_old"))


@check("GD101", from_log=driver_too_old_in_log)
def driver_too_old(facts, rule):
    runtime = torch_cuda(facts)
    if runtime is None:
        return
    driver = facts.get("nvml.driver_version", None)
    have_cuda = driver_cuda(facts)
    if driver is None and have_cuda is None:
        if facts.get("nvml.status", None) == "unavailable":
            return  # no NVIDIA driver at all: GD103/GD105 territory, not "too old"
        raise MissingFact("nvml.driver_version")
    if driver_supports(driver, have_cuda, runtime):
        return
    need = Release(runtime)  # major.minor, or a major (torch_cuda)
    floor = mvc_floor(need.major) if need.major >= 11 else None
    ga = min_driver(runtime)
    minimum = min(v for v in (floor, ga) if v is not None) if (floor or ga) else None
    better = best_wheel_cuda(driver, have_cuda, gpu_ccs(facts), facts.get("torch.version", None))
    shown = f"driver {driver}" if driver else "the driver"
    message = f"{shown} supports CUDA ≤ {have_cuda or '?'}, but torch {facts.get('torch.version', '')} is built for " \
              f"CUDA {runtime}"
    if minimum:
        message += f" (needs driver ≥ {minimum}{' through minor-version compatibility' if floor else ''})"
    evidence = {"driver": driver, "driver_cuda": have_cuda, "torch_cuda": runtime,
                "min_driver": str(minimum) if minimum else None}
    commands = _install_command(better, facts.get("torch.version", None), facts)
    if minimum:
        fix = rule.fix(case="driver_or_wheel" if better else "driver", commands=commands,
                       values={"min_driver": minimum, "cuda": better} if better else {"min_driver": minimum})
    else:
        fix = rule.fix(commands=commands)
    running = _torch_runs_cuda(facts)
    if running:
        # NVML's CUDA version is the libcuda NVML's own process loads; the job's (a forward-compatibility package on
        # its LD_LIBRARY_PATH, a container's) may be newer: torch's working CUDA outranks the table
        yield rule.finding(f"{message}; yet torch initialised CUDA and sees {running} device(s) here, so the job's "
                           "CUDA driver library is newer than the one NVML reports (CUDA forward compatibility?)",
                           evidence={**evidence, "torch_devices": running}, fix=fix, severity=Severity.INFO)
        return
    yield rule.finding(message, evidence=evidence, fix=fix)


def _torch_runs_cuda(facts) -> int:
    """How many CUDA devices the job's torch initialised (its probe: CUDA's own count), 0 where it did not."""
    if facts.get("torch.cuda_available", None) is not True:
        return 0
    return int(facts.get("torch.device_count", None) or 0)


def nvcc_torch_mismatch_in_log(facts, rule):
    for event in log_events(facts, "cuda_mismatch")[:1]:
        nvcc, torch_cuda = event.get("nvcc"), event.get("torch_cuda")
        runtime = major_minor(torch_cuda)
        versions = f" (CUDA {nvcc} installed, torch built with {torch_cuda})" if nvcc and torch_cuda else ""
        yield rule.finding(
            f"DeepSpeed refused to build its ops: the CUDA toolkit (nvcc) differs from torch's CUDA{versions}",
            evidence={**cited(event), "nvcc": nvcc, "torch_cuda": torch_cuda},
            fix=_toolkit_fix(rule, runtime, major_minor(nvcc)) if runtime else rule.fix())


def _toolkit_fix(rule, runtime: str, nvcc: Optional[str]):
    """Install the toolkit of torch's CUDA `runtime`, or a torch wheel for the installed `nvcc` where one exists."""
    commands = (f'conda install -c "nvidia/label/cuda-{runtime}.0" cuda-toolkit', "export CUDA_HOME=$CONDA_PREFIX")
    wheels = {major_minor(row["cuda"]) for row in table("torch_wheels").get("wheel", [])}
    if nvcc and nvcc in wheels:
        return rule.fix(case="toolkit_or_wheel", values={"cuda": runtime, "nvcc": nvcc, "wheel": wheel_tag(nvcc)},
                        commands=commands)
    return rule.fix(case="toolkit", values={"cuda": runtime}, commands=commands)


# DeepSpeed's op builder (op_builder/builder.py `cuda_minor_mismatch_ok`, 0.19.8): the toolkit and torch's CUDA may
# differ in the minor only where both are listed; any other difference raises CUDAMismatchException (CUDA 13: none).
DEEPSPEED_MINOR_SKEW_OK = {
    10: {"10.0", "10.1", "10.2"},
    11: {"11.0", "11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7", "11.8"},
    12: {"12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9"},
}
BUILD_LOG_EVENTS = ("cuda_mismatch", "cuda_home_missing", "ninja_missing", "nvcc_arch_unsupported",
                    "host_compiler_unsupported")


def extension_build_in_scope(facts) -> Optional[str]:
    """What makes the job compile CUDA code with this nvcc, or None: DeepSpeed installed (its ops JIT-build at first
    use), a DeepSpeed config, or a build log."""
    if facts.get("torch.deepspeed.version", None):
        return f"DeepSpeed {facts.get('torch.deepspeed.version')} is installed"
    if facts.get("ds_config", None):
        return "a DeepSpeed config is given"
    if log_events(facts, *BUILD_LOG_EVENTS):
        return "the log shows an extension build"
    return None


def deepspeed_in_scope(facts) -> bool:
    return bool(facts.get("torch.deepspeed.version", None) or facts.get("ds_config", None))


@check("GD102", from_log=nvcc_torch_mismatch_in_log)
def nvcc_torch_mismatch(facts, rule):
    runtime = torch_cuda(facts)
    nvcc = major_minor(facts.get("nvcc.version"))
    if runtime is None or nvcc is None or nvcc == runtime:
        return
    ours, theirs = Release(nvcc), Release(runtime)
    if "." not in runtime and ours.major == theirs.major:
        return  # only torch's CUDA major is known (a pasted `pip show torch`): no minor to compare
    where = f" ({facts.get('nvcc.path')})" if facts.get("nvcc.path", None) else ""
    evidence = {"nvcc": nvcc, "nvcc_path": facts.get("nvcc.path", None), "torch_cuda": runtime}
    fix = _toolkit_fix(rule, runtime, nvcc)
    build = extension_build_in_scope(facts)
    if ours.major != theirs.major:
        consequence = (f"DeepSpeed ops and other CUDA extensions fail to build or load ({build})" if build else
                       "a CUDA extension built here (DeepSpeed ops, flash-attn, apex) would fail to build or load; "
                       "nothing in view builds one")
        yield rule.finding(
            f"nvcc {nvcc}{where} ≠ torch CUDA {runtime} (major {ours.major} vs {theirs.major}): {consequence}",
            evidence={**evidence, "build": build}, fix=fix, severity=Severity.ERROR if build else Severity.WARNING)
        return
    allowed = DEEPSPEED_MINOR_SKEW_OK.get(theirs.major, set())
    if deepspeed_in_scope(facts) and not {nvcc, runtime} <= allowed:
        skipped = facts.env("DS_SKIP_CUDA_CHECK") == "1"
        yield rule.finding(
            f"nvcc {nvcc}{where} vs torch CUDA {runtime}: DeepSpeed's op builder accepts this minor skew only for "
            f"{', '.join(sorted(allowed, key=Release)) or f'no CUDA {theirs.major} version'} and "
            + ("lets it through only because DS_SKIP_CUDA_CHECK=1" if skipped else
               "refuses to build its ops (CUDAMismatchException)"),
            evidence={**evidence, "deepspeed_accepts": sorted(allowed, key=Release)}, fix=fix,
            severity=Severity.WARNING if skipped else Severity.ERROR)
        return
    if log_events(facts, "cuda_mismatch"):  # a builder in the log refused its toolkit: that, not the minor skew
        yield from nvcc_torch_mismatch_in_log(facts, rule)
        return
    yield rule.finding(
        f"nvcc {nvcc}{where} vs torch CUDA {runtime}: same major, another minor, which torch's extension builder "
        "calls \"most likely not a problem\"", evidence=evidence, fix=fix, severity=Severity.INFO)


@check("GD103")
def torch_cpu_only(facts, rule):
    require_torch(facts)
    if facts.get("torch.status") != "ok" or facts.get("torch.cuda") is not None or facts.get("torch.hip", None):
        return
    gpus = facts.get("nvml.gpus", None)
    driver = facts.get("nvml.driver_version", None)
    if not gpus and not driver:
        if gpus is None and driver is None and facts.get("nvml.status", None) != "unavailable":
            raise MissingFact("nvml.gpus")
        return
    have_cuda = driver_cuda(facts)
    better = best_wheel_cuda(driver, have_cuda, gpu_ccs(facts), facts.get("torch.version", None))
    commands = _install_command(better, facts.get("torch.version", None), facts)
    names = ", ".join(sorted({g.get("name", "?") for g in gpus or []})) or f"driver {driver}"
    yield rule.finding(
        f"torch {facts.get('torch.version', '')} is a CPU-only build, but this machine has {names}",
        evidence={"torch": facts.get("torch.version", None), "gpus": len(gpus or []), "driver": driver},
        fix=rule.fix(case="wheel_for_driver", values={"cuda": better, "driver": driver},
                     commands=commands) if better and driver else rule.fix(commands=commands),
    )


def _runs(cc: str, archs: list) -> bool:
    """Whether a GPU of compute capability `cc` has SASS or JIT-able PTX in torch's arch list."""
    return _runs_on(cc, tuple(archs))


@lru_cache(maxsize=256)  # every GPU of every node of a fleet asks about the same few capabilities and lists
def _runs_on(cc: str, archs: tuple) -> bool:
    major, minor = (int(part) for part in cc.split("."))
    for arch in archs:
        match = re.fullmatch(r"(sm|compute)_(\d+?)(\d)([af]?)", arch)
        if not match:
            continue
        kind, a_major, a_minor, special = match.group(1), int(match.group(2)), int(match.group(3)), match.group(4)
        if special == "a" and (a_major, a_minor) != (major, minor):
            continue  # sm_90a: that exact architecture only (an H100 runs it, an H200 too: both 9.0)
        if special == "f" and not (a_major == major and a_minor <= minor):
            continue  # sm_100f: the family, the same major from that minor up
        if special:
            return True
        if kind == "sm" and a_major == major and a_minor <= minor:
            return True
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def _arch_list(facts, runtime: str) -> tuple:
    """(arch list, how we know it, archs in doubt): reported by torch, else the official wheel's list for its
    release. A table row decides only through the cells its sources verify: a row whose `verified` names its SASS
    `archs` alone leaves its PTX in doubt, for the caller to treat as unknown."""
    reported = facts.get("torch.arch_list", None)
    if reported:
        return list(reported), "torch.cuda.get_arch_list()", []
    torch_version = facts.get("torch.version")
    if "+cu" not in torch_version:
        raise MissingFact("torch.arch_list")
    machine = facts.get("host.arch", None)
    if machine not in (None, "x86_64", "AMD64"):
        raise MissingFact("torch.arch_list", f"gpudoctor's table lists the official x86_64 wheels' arch lists; this "
                                             f"machine is {machine} (GH200, GB200), whose wheels are built apart: "
                                             "torch.cuda.get_arch_list() would tell")
    row = wheel_archs(torch_version, runtime)
    if row is None:
        raise MissingFact("torch.arch_list")
    wheel = f"the official torch {major_minor(torch_version)} {wheel_tag(runtime)} wheel"
    sass = [f"sm_{a.replace('.', '')}" for a in row["archs"]]
    ptx = [f"compute_{a.replace('.', '')}" for a in row["ptx"]]
    if row.get("status") == "verified":
        return sass + ptx, wheel, []
    if "archs" in row.get("verified", []):
        return sass, wheel, ptx
    raise MissingFact("torch.arch_list", f"the arch list of {wheel} is {row.get('status', 'unverified')} in "
                                         "gpudoctor's table; torch.cuda.get_arch_list() would tell")


def gpu_arch_not_in_torch_in_log(facts, rule):
    shown = log_events(facts, "no_kernel_image")[:1]
    for event in shown:
        which = f"{event['gpu']} ({event['sm']}) " if event.get("gpu") else "this GPU "
        yield rule.finding(
            f"the log shows torch has no kernels for {which}: {event['line']}",
            evidence=cited(event),
            fix=rule.fix(case="log_no_kernel_image"))
    if not shown:
        yield from (_outside_range(rule, event) for event in log_events(facts, "capability_outside_range")[:1])


def _outside_range(rule, event):
    """torch's 'which is of cuda capability 12.1 … Minimum and Maximum … is (8.0) - (12.0)': below the minimum,
    or a newer major than the maximum, torch has no kernels; a newer minor of the maximum's major runs the maximum's
    (the GB10's false alarm, pytorch/pytorch#164596); without the range the warning does not say which."""
    cc, low, high = version(event.get("cc")), version(event.get("minimum")), version(event.get("maximum"))
    name = f"{event.get('device')} (compute capability {event.get('cc')})"
    if cc is not None and ((low is not None and cc < low) or (high is not None and cc.major > high.major)):
        return rule.finding(f"the log shows torch has no kernels for {name}: outside {event['minimum']} to "
                            f"{event['maximum']}: {event['line']}", evidence=cited(event),
                            fix=rule.fix(case="log_no_kernel_image"))
    if cc is not None and high is not None and cc.major == high.major:
        return rule.finding(f"torch warns that {name} is above its maximum, {event['maximum']}, but a GPU runs the "
                            f"kernels of an older minor of its own major: a false alarm: {event['line']}",
                            evidence=cited(event), severity=Severity.INFO, fix=rule.fix(case="log_no_kernel_image"))
    return rule.finding(f"torch warns that {name} is outside the compute capabilities it was built for: below the "
                        "minimum it has no kernels for it, a newer minor of a supported major still runs (the range is "
                        f"on the warning's next line): {event['line']}", evidence=cited(event),
                        severity=Severity.WARNING, fix=rule.fix(case="log_no_kernel_image"))


@check("GD104", from_log=gpu_arch_not_in_torch_in_log)
def gpu_arch_not_in_torch(facts, rule):
    runtime = torch_cuda(facts)
    if runtime is None:
        return
    facts.get("nvml.gpus")  # unknown without NVML
    job = job_gpus(facts)
    gpus = job.devices
    if not gpus:
        return
    archs, known_from, in_doubt = _arch_list(facts, runtime)
    seen = set()
    for gpu in gpus:
        cc = gpu_cc(gpu)
        if cc is None:
            raise MissingFact("nvml.gpus.cc")
        if cc in seen or _runs(cc, archs):
            continue
        if _runs(cc, in_doubt):
            raise MissingFact("torch.arch_list", f"{gpu.get('name', 'this GPU')} (compute capability {cc}) runs on "
                                                 f"{known_from} only through PTX ({' '.join(in_doubt)}), and whether "
                                                 "its release carries that PTX is disputed in gpudoctor's table; "
                                                 "torch.cuda.get_arch_list() would tell")
        seen.add(cc)
        sm = "sm_" + cc.replace(".", "")
        yield rule.finding(
            f"{gpu.get('name', 'GPU')} is {sm}, but torch {facts.get('torch.version')} ships kernels for "
            f"{' '.join(archs) or 'no GPU arch'}: 'no kernel image is available for execution on the device'"
            f"{job.note()}",
            evidence={"gpu": gpu.get("name"), "cc": cc, "arch_list": archs, "arch_list_from": known_from},
            fix=rule.fix(case="older_gpu" if float(cc) < 7.5 else "newer_gpu", values={"cc": cc},
                         commands=_install_command(best_wheel_cuda(
                             facts.get("nvml.driver_version", None), driver_cuda(facts),
                             sorted({c for c in map(gpu_cc, gpus) if c}), facts.get("torch.version")),
                             facts.get("torch.version"), facts)),
        )


RELOAD_MODULES = "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia"
NVML_PROBLEMS = {  # nvml.error_kind → what is wrong; GD105's fix text for it is the catalog's case of that name
    "driver_mismatch": "The kernel module and the user-space NVIDIA library differ (driver upgraded without a reboot)",
    "driver_not_loaded": "The NVIDIA kernel module is not loaded",
    "no_devices": "The driver is loaded but sees no GPU",
    "library_not_found": ("The NVIDIA kernel module is loaded but libnvidia-ml is missing (a container without the "
                          "NVIDIA runtime?)"),
    "unknown": ("NVML failed with 'Unknown Error': in a container this means it lost access to the GPU device nodes "
                "(the host ran `systemctl daemon-reload` and systemd rewrote the container's device cgroup)"),
    "no_permission": "No permission to open the NVIDIA device nodes",
    "bindings": ("The pynvml module is not nvidia-ml-py's: a leftover pynvml.py of the nvidia-ml-py3 package, which "
                 "installs the same file"),
}
# NVIDIA Container Toolkit, NVIDIA_VISIBLE_DEVICES: `none` ("no GPUs will be accessible, but driver capabilities will
# be enabled"), `void` or empty ("the same behavior as runc": no GPU, no driver): a container that asked for no GPU
NO_GPU_ASKED = ("none", "void", "")


LOGGED_PROBLEMS = {  # log event kind → what it means; GD105's fix is the catalog's case of the same name
    "nvml_mismatch": "the NVIDIA kernel module and user-space library differ (driver upgraded without a reboot)",
    "driver_missing": "the job could not reach an NVIDIA driver",
    "cuda_system_not_ready": ("CUDA could not initialise (error 802, system not yet initialized): on an NVSwitch "
                              "system the fabric manager is not running or its version differs from the driver's"),
}


def nccl_tests_failure(facts) -> list:
    """nccl-tests' `Test CUDA failure common.cu:941 'system not yet initialized'` as a log event (CUDA error 802)."""
    failure = (facts.get("bench.nccl", None) or {}).get("failure") or {}
    if failure.get("library") == "CUDA" and failure.get("error") == "system not yet initialized":
        return [{"kind": "cuda_system_not_ready", "where": "nccl-tests output", "line": failure.get("line")}]
    return []


def driver_unusable_in_log(facts, rule):
    for event in (log_events(facts, *LOGGED_PROBLEMS) + nccl_tests_failure(facts))[:1]:
        kind = event["kind"]
        mismatch, missing = kind == "nvml_mismatch", kind == "driver_missing"
        yield rule.finding(f"{LOGGED_PROBLEMS[kind]}: {event['line']}", evidence=cited(event), fix=rule.fix(
            case="driver_mismatch" if mismatch else "log_driver_missing" if missing else "fabric_manager"))


FABRIC_UNREADY = {  # NVML's fabric state (nvml.h, NVML_GPU_FABRIC_STATE_*) of a GPU not in the NVLink fabric
    "not_started": "has not started registering with the NVLink fabric",
    "in_progress": "is still registering with the NVLink fabric",
}


def _fabric_problem(gpu: dict) -> Optional[str]:
    """What NVML's fabric state says is wrong with a GPU (Hopper and newer on NVSwitch systems), or None: not
    registered, or registered with an error status (nvml.h: status "must be checked only if state returns complete")."""
    fabric = gpu.get("fabric") or {}
    if fabric.get("state") in FABRIC_UNREADY:
        return FABRIC_UNREADY[fabric["state"]]
    if fabric.get("state") == "completed" and fabric.get("status") not in (None, "success"):
        return f"failed to register with the NVLink fabric ({fabric['status']})"
    return None


def fabric_not_ready(facts, rule):
    """The driver's own verdict on the fabric manager: GPUs NVML reports outside the NVLink fabric. CUDA then fails
    with error 802 (cudaErrorSystemNotReady) on every GPU of the node."""
    gpus = [(gpu, _fabric_problem(gpu)) for gpu in facts.get("nvml.gpus", None) or []]
    unready = [(gpu, problem) for gpu, problem in gpus if problem]
    if not unready:
        return
    first, problem = unready[0]
    which = f"GPU {first.get('index')}" if len(unready) == 1 else f"{len(unready)} of {len(gpus)} GPUs (GPU " \
                                                                   f"{first.get('index')}"
    yield rule.finding(
        f"{which}{')' if len(unready) > 1 else ''} {problem}, NVML says: the fabric manager is not running, or its "
        "version differs from the driver's; CUDA fails with error 802 (system not yet initialized) until it "
        "completes", evidence={"gpus": [gpu.get("index") for gpu, _ in unready],
                               "fabric": [gpu.get("fabric") for gpu, _ in unready]},
        fix=rule.fix(case="fabric_manager"))


@check("GD105", from_log=driver_unusable_in_log)
def driver_unusable(facts, rule):
    """The node's part: NVML, the driver, its kernel module and device nodes, the NVLink fabric (no torch needed)."""
    kind = facts.get("nvml.error_kind", None)
    if facts.get("nvml.status") == "ok":
        yield from fabric_not_ready(facts, rule)
        return
    asked = facts.env("NVIDIA_VISIBLE_DEVICES")
    if facts.get("nvml.status") != "error" or (asked is not None and asked.strip().lower() in NO_GPU_ASKED):
        return  # a container that asked for no GPU has none to reach
    evidence = {"error_kind": kind, "error": facts.get("nvml.error", None),
                "kernel_module": facts.get("nvml.kernel_module", None)}
    if kind not in NVML_PROBLEMS:
        yield from _other_init_error(facts, rule, kind, evidence)
        return
    yield rule.finding(
        f"{NVML_PROBLEMS[kind]}: {facts.get('nvml.error', None) or kind}", evidence=evidence,
        fix=rule.fix(case=kind if kind in ("driver_mismatch", "driver_not_loaded", "no_devices", "library_not_found",
                                           "unknown", "no_permission", "bindings") else "unknown",
                     commands=(RELOAD_MODULES,) if kind == "driver_mismatch" else ()))


def _other_init_error(facts, rule, kind: str, evidence: dict):
    """NVML's initialisation failing with a return code GD105 has no case of its own for: what rules/nvml_errors.toml
    says the code means (`other`, a failure outside NVML such as nvidia-ml-py missing, is not the driver's)."""
    entry = next((row for row in table("nvml_errors")["error"] if row["kind"] == kind), None)
    if entry is None:
        return
    yield rule.finding(f"NVML could not initialise: {facts.get('nvml.error', None) or kind} ({entry['meaning']})",
                       evidence={**evidence, "meaning": entry["meaning"]},
                       fix=rule.fix(case="nvml_other", values={"kind": kind}))


# CUDA's own errors at initialisation (cuda_runtime_api.h, cudaError): each has a cause of its own, not the job's
CUDA_INIT_ERRORS = (
    (re.compile(r"[Ee]rror 802\b|system not yet initialized|cudaErrorSystemNotReady"), "fabric_manager",
     "CUDA error 802 (system not yet initialized): on an NVSwitch system the fabric manager is not running or its "
     "version differs from the driver's"),
    (re.compile(r"[Ee]rror 804\b|forward compatibility was attempted on non supported HW"
                r"|cudaErrorCompatNotSupportedOnDevice"), "forward_compat",
     "CUDA error 804: the CUDA forward-compatibility package is in use on a GPU that does not "
     "support it (only data-center GPUs do)"),
)


def _hides_every_device(facts) -> bool:
    """CUDA_VISIBLE_DEVICES set to a value that leaves CUDA no device on this node (GD107 reports it)."""
    visible = facts.env("CUDA_VISIBLE_DEVICES")
    return visible is not None and (visible.strip() in HIDES_ALL or not named_devices(facts, visible))


@check("GD109")
def torch_cuda_unavailable(facts, rule):
    """The job's part: the node is usable, yet the job's torch cannot reach CUDA."""
    runtime = torch_cuda(facts)
    if facts.get("nvml.status") != "ok" or runtime is None or facts.get("torch.cuda_available") is not False:
        return
    if not facts.get("nvml.gpus") or _hides_every_device(facts):
        return  # nothing to use, or GD107 judges the device selection
    error = facts.get("torch.cuda_error", None) or "; ".join(facts.get("torch.warnings", []))[:300]
    cause = next(((case, meaning) for pattern, case, meaning in CUDA_INIT_ERRORS if pattern.search(error)), None)
    if cause is None and not driver_supports(facts.get("nvml.driver_version", None), driver_cuda(facts), runtime):
        return  # GD101 explains it
    seen = (f"NVML sees {len(facts.get('nvml.gpus'))} GPU(s)" if facts.get("nvml.gpus_counted", None) is not False
            else "the report names a GPU")
    yield rule.finding(
        f"{seen}, but torch.cuda.is_available() is False{': ' + error if error else ''}"
        + (f": {cause[1]}" if cause else f"; the driver supports CUDA {runtime}"),
        evidence={"torch_cuda": runtime, "error": error or None, "cause": cause[0] if cause else None},
        fix=rule.fix(case="fabric_manager") if cause and cause[0] == "fabric_manager" else
        rule.fix(case="forward_compat") if cause else rule.fix())


@check("GD106")
def cuda_toolkit_ambiguous(facts, rule):
    home = facts.get("nvcc.cuda_home") or facts.get("nvcc.cuda_path")
    on_path = major_minor(facts.get("nvcc.version"))
    if home:
        at_home = toolkit_version_at(facts, home)
        if at_home and on_path and at_home != on_path:
            yield rule.finding(
                f"CUDA_HOME={home} is CUDA {at_home}, but the nvcc on PATH ({facts.get('nvcc.path')}) is {on_path}: "
                "builds pick one or the other depending on the tool",
                evidence={"cuda_home": home, "cuda_home_version": at_home, "nvcc_path": facts.get("nvcc.path"),
                          "nvcc_version": on_path},
                fix=rule.fix(case="home_not_on_path", values={"cuda_home": home},
                             commands=(f'export PATH="{home}/bin:$PATH"',)))
        return
    used, runtime = on_path, torch_cuda(facts)
    if runtime is None or used is None or used == runtime:
        return
    matching = [t["path"] for t in facts.get("nvcc.toolkits", []) if major_minor(t.get("version")) == runtime]
    if matching:
        yield rule.finding(
            f"extensions will build with nvcc {used} from PATH, but {matching[0]} holds CUDA {runtime}, the version "
            "torch was built with",
            evidence={"nvcc_version": used, "torch_cuda": runtime, "matching_toolkits": matching},
            fix=rule.fix(case="point_cuda_home", values={"toolkit": matching[0]}, applicability="safe",
                         env=EnvChange(set={"CUDA_HOME": matching[0]})))


_DEVICE = re.compile(r"^(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9A-Za-z/-]+)$")
# CUDA's and torch's words for a device the process does not have (rules/messages: the atlas entries feeding GD107)
_DEVICE_ERRORS = ("device_count_mismatch", "invalid_device_ordinal", "no_visible_device")


def mig_devices_in_log(facts, rule):
    """A device error in a paste that also shows GPUs in MIG mode (its nvidia-smi table): CUDA gives a process one
    MIG device (from R570 one per GPU instance) while torch counts the GPUs through NVML, so the cause is MIG's
    device enumeration, whatever the error's general reading."""
    in_mig = [gpu for gpu in facts.get("nvml.gpus", None) or [] if gpu.get("mig_enabled")]
    event = next(iter(log_events(facts, *_DEVICE_ERRORS)), None)
    if not in_mig or event is None or event.get("fix") == "one_mig_device_per_process":
        return  # no MIG in the paste, no device error, or the atlas entry already reads it as MIG's (its own words)
    gpus = ", ".join(str(gpu.get("index", "?")) for gpu in in_mig)
    yield rule.finding(
        f"GPU(s) {gpus} are in MIG mode, and a process gets one MIG device of them (from driver R570 one per GPU "
        f"instance) while torch counts the GPUs through NVML: {event.get('line')}",
        evidence={**cited(event), "mig_gpus": [gpu.get("index") for gpu in in_mig]},
        fix=rule.fix(case="mig_visible_devices"))


@check("GD107", from_log=mig_devices_in_log)
def cuda_visible_devices_invalid(facts, rule):
    value = facts.env("CUDA_VISIBLE_DEVICES")
    if value is None:
        return
    fix_unset = rule.fix(env=EnvChange(unset=("CUDA_VISIBLE_DEVICES",)))
    if value.strip() in ("", "-1"):
        yield rule.finding(f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU from CUDA", fix=fix_unset,
                           evidence={"CUDA_VISIBLE_DEVICES": value})
        return
    nvml_gpus = facts.get("nvml.gpus", None) or []
    gpus = usable_gpus(nvml_gpus)  # what an index names: the GPUs this job may open that answer
    uuids = _device_uuids(nvml_gpus)
    entries = [entry.strip() for entry in value.split(",")]  # CUDA strips the spaces around an entry
    repeated = next((entry for position, entry in enumerate(entries) if entry in entries[:position]), None)
    if repeated is not None:
        yield rule.finding(f"CUDA_VISIBLE_DEVICES={value!r} names {repeated} twice: CUDA then sees no device at all "
                           "('no CUDA-capable device is detected')",
                           evidence={"CUDA_VISIBLE_DEVICES": value, "repeated": repeated}, fix=fix_unset)
        return
    for position, entry in enumerate(entries):
        problem = _entry_problem(facts, entry, gpus, uuids)
        if problem:
            dropped = "" if position == len(entries) - 1 else "; CUDA ignores it and every entry after it"
            yield rule.finding(f"CUDA_VISIBLE_DEVICES={value!r}: {problem}{dropped}",
                               evidence={"CUDA_VISIBLE_DEVICES": value, "gpus": len(gpus)}, fix=fix_unset)
            return
    if not nvml_gpus:  # which devices the value names is known only against the GPUs NVML lists
        if facts.get("nvml.gpus", None) is None:
            raise MissingFact("nvml.gpus")
        return  # no GPU at all: nothing to name (GD103/GD105 say why)
    yield from _more_than_cuda_uses(facts, rule, value)


def _device_uuids(nvml_gpus: list) -> list:
    """The UUIDs of the GPUs NVML lists and of their MIG devices."""
    return [g["uuid"] for g in nvml_gpus if g.get("uuid")] + [
        m["uuid"] for g in nvml_gpus for m in g.get("mig_devices", []) if m.get("uuid")]


def _entry_problem(facts, entry: str, gpus: list, uuids: list) -> Optional[str]:
    """What is wrong with one entry of CUDA_VISIBLE_DEVICES: malformed, an index past the GPUs this job may open,
    or a UUID no device has; None when nothing is."""
    if not _DEVICE.match(entry):
        return f"entry {entry!r} is malformed (spaces and names are not allowed)"
    if entry.isdigit() and gpus and int(entry) >= len(gpus):
        require_count(facts)
        return f"index {entry} does not exist: CUDA can open {len(gpus)} GPU(s) here, 0–{len(gpus) - 1}"
    if (entry.startswith(("GPU-", "MIG-")) and "/" not in entry and uuids
            and not any(u.startswith(entry) for u in uuids)):
        return f"{entry} matches no GPU or MIG device UUID on this machine"
    return None


def _more_than_cuda_uses(facts, rule, value: str):
    """More devices named than one process may use where MIG devices are among them (MIG_RULES)."""
    named = named_devices(facts, value)
    driver = facts.get("nvml.driver_version", None)
    used = limit_mig(named, driver)
    entries = len(value.split(","))
    if len(used) >= entries or not mig_dropped(named, driver):
        return  # one index naming a GPU in MIG mode: one of its MIG devices, as asked; or no MIG device dropped
    yield rule.finding(
        f"CUDA_VISIBLE_DEVICES={value!r} names {entries} devices, but {mig_dropped(named, driver)}: this process "
        f"uses {len(used)} ({', '.join(str(d.get('uuid') or d.get('name')) for d in used)}), not {entries}",
        evidence={"CUDA_VISIBLE_DEVICES": value, "named": entries, "used": [d.get("uuid") for d in used],
                  "driver": driver, "mig_rule": mig_rule(driver)},
        fix=rule.fix(case="one_mig_device_per_process"))


@check("GD110")
def torch_not_installed(facts, rule):
    if facts.get("torch.status") != "missing":
        return
    python = facts.get("torch.python", None) or "the job's interpreter"
    yield rule.finding(
        f"torch is not installed in {python}: the rules about the torch build could not run (unknown, not passed)",
        evidence={"python": python, "error": facts.get("torch.error", None)},
        fix=rule.fix())


@check("GD108")
def torch_import_broken(facts, rule):
    if facts.get("torch.status") != "broken":
        if facts.get("torch.imported", None) is False:
            raise MissingFact("torch.imported", "the report lists torch as installed but does not show `import torch` "
                                                "running (collect_env and the `env` commands do)")
        return
    error = facts.get("torch.error", None) or "unknown error"
    python = facts.get("torch.python", None) or "the job's interpreter"
    yield rule.finding(
        f"`import torch` fails in {python}: {error}",
        evidence={"python": python, "error": error},
        fix=rule.fix())
