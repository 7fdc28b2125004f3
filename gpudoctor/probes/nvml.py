"""The NVIDIA driver and GPUs, read through NVML in a child process (see nvml_child.py)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from gpudoctor.knowledge import table
from gpudoctor.probes import Probe, ProbeContext
from gpudoctor.probes.command import CommandTimeout, run_command

CHILD = Path(__file__).with_name("nvml_child.py")


def pynvml_path() -> list:
    """The import path entry that finds pynvml in this process (a user site, PYTHONPATH, an Lmod/Spack module's
    path), for the child: `python -I` reads neither PYTHONPATH nor the user site. Never the current directory,
    which is what -I keeps out. Finds without importing."""
    try:
        spec = importlib.util.find_spec("pynvml")
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        return []
    origin = Path(spec.origin).resolve()
    entry = origin.parent.parent if spec.submodule_search_locations else origin.parent
    return [] if entry == Path.cwd().resolve() else [str(entry)]


# The child is loaded as a module, from the bytecode Python keeps for it: a script named by its path is compiled anew
# on every run (~10 ms of every Prolog).
LOAD_CHILD = ("import sys, types; from importlib.machinery import SourceFileLoader; "
              "child = sys.modules['nvml_child'] = types.ModuleType('nvml_child'); "
              "SourceFileLoader('nvml_child', sys.argv[1]).exec_module(child); child.main(sys.argv[2:])")


def child_argv() -> list:
    """The NVML child's command line: isolated (-I, and -S: no site-packages but exactly the path entry that found
    pynvml here)."""
    return [sys.executable, "-I", "-S", "-c", LOAD_CHILD, str(CHILD), *pynvml_path()]


def named(facts: dict) -> dict:
    """The child's facts with each return code its nvidia-ml-py could not name (`other`, `error_code`: a code
    newer than that release, e.g. GPU_NOT_FOUND on 12.535.x) named from rules/nvml_errors.toml."""
    names = {entry["code"]: entry["kind"] for entry in table("nvml_errors")["error"]}
    for item in [*facts.get("gpus", []), *facts.get("hidden_gpus", [])]:
        code = item.pop("error_code", None)
        if item.get("error_kind") == "other" and code in names:
            item["error_kind"] = names[code]
    return facts


def hung(stderr: str, seconds: float) -> dict:
    """The facts the child read before the driver stopped answering (its progress lines on stderr), the GPU it was
    reading listed as broken with the query it hung in; raises CommandTimeout's absence of progress as a timeout."""
    from gpudoctor.probes.nvml_child import QUERY, READING

    lines = stderr.splitlines()
    last = max((i for i, line in enumerate(lines) if line.startswith(READING)), default=None)
    if last is None:
        return {}
    progress = json.loads(lines[last][len(READING):])
    queries = [line[len(QUERY):] for line in lines[last:] if line.startswith(QUERY)]
    facts = progress["facts"]
    query = queries[-1] if queries else "handle"
    facts["gpus"].append({"index": progress["index"], "error_kind": "timeout", "error_query": query,
                          "error": f"no answer within gpudoctor's {seconds:g} s: the driver hung"})
    if progress["index"] + 1 < progress["count"]:
        facts["gpus_counted"] = False  # the GPUs after it were never read
    return facts


def _library_path_as_started() -> bool:
    """Whether LD_LIBRARY_PATH is what this process started with (/proc/self/environ): the dynamic linker read it
    then, so a library that does not load here would not load in a child either. A caller that changed it since (a
    test, a library user) gets the child."""
    try:
        with open("/proc/self/environ", "rb") as handle:
            started = dict(item.partition(b"=")[::2] for item in handle.read().split(b"\0") if item)
    except OSError:
        return False
    return started.get(b"LD_LIBRARY_PATH") == os.environb.get(b"LD_LIBRARY_PATH")


def probe_nvml(ctx: ProbeContext) -> dict:
    from gpudoctor.probes import nvml_child  # the standalone child's own test for a machine without the driver

    absent = nvml_child.without_driver() if _library_path_as_started() else None
    if absent is not None:  # no driver to wedge: answered here, without a child (~20 ms of CPU on a CPU node)
        return {"nvml": absent}
    try:
        result = run_command(child_argv(), ctx.timeout)
    except CommandTimeout as exc:
        facts = hung(exc.stderr, ctx.timeout)
        if not facts:
            raise
        return {"nvml": named(facts)}
    if result.returncode != 0:
        raise RuntimeError(f"NVML child exited {result.returncode}: {result.stderr.strip()[-300:]}")
    return {"nvml": named(json.loads(result.stdout))}


def read_gpus(timeout: float) -> list:
    """NVML's GPUs, for a process that already runs threads (a benchmark with CUDA initialised): a plain
    subprocess, no `preexec_fn` (Python's docs: not safe in the presence of threads); [] when NVML cannot tell."""
    done = subprocess.run(child_argv(), capture_output=True, text=True, timeout=timeout, check=False)
    return named(json.loads(done.stdout)).get("gpus") or [] if done.returncode == 0 else []


PROBE = Probe("nvml", probe_nvml, starts_child=True)
