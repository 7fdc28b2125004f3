"""GD111: a CUDA library (cuDNN, cuBLAS, NCCL …) that is not the one torch was built with and ships as a wheel:
a system toolkit or LD_LIBRARY_PATH ahead of the nvidia-* wheels."""

from __future__ import annotations

import posixpath
from typing import Optional

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.knowledge import version
from gpudoctor.model import Severity

NAMES = {"cudnn": "cuDNN", "cublas": "cuBLAS", "nccl": "NCCL", "nvjitlink": "nvJitLink", "cusparse": "cuSPARSE",
         "cuda_runtime": "the CUDA runtime", "cufft": "cuFFT", "cusolver": "cuSOLVER", "curand": "cuRAND"}


def cudnn_version(value) -> Optional[str]:
    """torch.backends.cudnn.version() (90100, 8902) or a dotted version → 'major.minor.patch'."""
    text = str(value or "")
    if text.isdigit():
        number = int(text)
        major = number // 10000 if number >= 10000 else number // 1000
        rest = number % 10000 if number >= 10000 else number % 1000
        return f"{major}.{rest // 100}.{rest % 100}"
    return text or None


def _same_release(a: str, b: str, parts: int = 2) -> bool:
    return a.split(".")[:parts] == b.split(".")[:parts]


def _from_log(facts, rule):
    for event in log_events(facts, "library_mismatch")[:1]:
        library = NAMES.get(str(event.get("library")), event.get("library"))
        stated = (f" (torch was built with {event['expected']}, {event['found']} was loaded)"
                  if event.get("expected") else f" (`{event['symbol']}` is missing from it)" if event.get("symbol")
                  else "")
        yield rule.finding(f"torch loaded a copy of {library} other than the one it was built with{stated}: "
                           f"{event['line']}", evidence={**cited(event), "library": event.get("library")}, fix=rule.fix(
                               values={"library": library}))


def _loaded_differs(facts, rule):
    """Live: the cuDNN / NCCL torch loaded against the wheel installed for it. Only the torch probe (which records
    `torch.python`) states what torch loaded: collect_env's cuDNN line lists the system's files. cuDNN's is
    torch.backends.cudnn.version() (cudnnGetVersion at run time); NCCL's the library's own ncclGetVersion
    (`torch.nccl_loaded`), never torch.cuda.nccl.version(), the header torch was built with
    (torch/csrc/cuda/nccl.cpp)."""
    if not facts.get("torch.python", None):
        return
    wheels = facts.get("torch.cuda_wheels", None) or {}
    loaded = {"cudnn": cudnn_version(facts.get("torch.cudnn", None)), "nccl": facts.get("torch.nccl_loaded", None)}
    for library, running in loaded.items():
        wheel = wheels.get(library)
        if running and wheel and not _same_release(running, wheel, 2 if library == "cudnn" else 3):
            yield rule.finding(
                f"torch runs {NAMES[library]} {running}, but its {NAMES[library]} wheel is {wheel}: another copy on "
                "the library path (LD_LIBRARY_PATH, a system toolkit) is loaded instead",
                evidence={"library": library, "loaded": running, "wheel": wheel,
                          "LD_LIBRARY_PATH": facts.env("LD_LIBRARY_PATH")},
                fix=rule.fix(values={"library": NAMES[library]}))


def _on_library_path(facts, rule):
    """Pasted: a system copy of a library whose major differs from the wheel's, in a directory LD_LIBRARY_PATH names
    (the loader searches it before torch's RUNPATH)."""
    wheels = facts.get("torch.cuda_wheels", None) or {}
    search = [posixpath.normpath(d) for d in (facts.env("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    for entry in facts.get("host.libraries", None) or []:
        wheel, found = wheels.get(entry.get("library")), entry.get("version")
        directory = posixpath.dirname(entry.get("path") or "")
        if not (wheel and found and directory in search):
            continue
        system, shipped = version(found), version(wheel)
        if system and shipped and system.major != shipped.major:
            yield rule.finding(
                f"{entry['name']} in {directory}, on LD_LIBRARY_PATH, is {NAMES.get(entry['library'])} "
                f"{found}; torch's wheel is {wheel}: the loader finds the system copy first",
                evidence={"library": entry["library"], "path": entry["path"], "wheel": wheel,
                          "LD_LIBRARY_PATH": facts.env("LD_LIBRARY_PATH")},
                fix=rule.fix(values={"library": NAMES.get(entry["library"])}), severity=Severity.WARNING)


@check("GD111")
def cuda_library_shadowed(facts, rule):
    logged = list(_from_log(facts, rule))
    if logged:
        return logged
    found = list(_loaded_differs(facts, rule)) + list(_on_library_path(facts, rule))
    if found:
        return found[:1] + [f for f in found[1:] if f.evidence["library"] != found[0].evidence["library"]]
    if not facts.has("torch.cuda_wheels"):  # recorded empty: a torch that ships no CUDA wheels (conda, source)
        raise MissingFact("torch.cuda_wheels", "torch's nvidia-* library wheels are not known (`pip list` shows "
                                               "them; a snapshot from an older gpudoctor lacks them)"
                          if facts.has("torch.version") else "")  # no torch at all: "torch not looked at" says it
    if not facts.has("torch.cudnn") and not facts.get("host.libraries", None):
        raise MissingFact("host.libraries", "which CUDA libraries the library path holds is not known")
    return []
