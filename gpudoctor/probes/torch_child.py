"""Report torch, CUDA-as-torch-sees-it and DeepSpeed of THIS interpreter as one JSON object on stdout.

Run by the job's interpreter (`gpudoctor check --python PATH`), which may be old and may not have gpudoctor:
keep this file standalone and Python 3.6 compatible (no walrus, no `from __future__ import annotations`).
"""
import gc
import json
import shutil
import sys
import warnings


def _metadata_version(name):
    """A distribution's version through importlib.metadata (importing it costs ~0.1 s: the slow path)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8
        try:
            import pkg_resources
            return pkg_resources.get_distribution(name).version
        except Exception:  # noqa: BLE001 - not installed
            return None
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _distribution_version(name):
    """A distribution's version from its `<name>-<version>.dist-info` folder on sys.path, found as importlib.metadata
    finds it (the first sys.path entry that has it wins) but without importing importlib.metadata. Anything unusual
    (a versionless .egg-info, a zip on sys.path) takes the slow path."""
    import os
    import re
    normal = re.sub(r"[-_.]+", "_", name).lower()
    for entry in sys.path:
        folder = entry or "."
        if not os.path.isdir(folder):
            if os.path.isfile(folder):  # a zip or an egg: let importlib.metadata look inside
                return _metadata_version(name)
            continue
        found = _distributions(folder).get(normal)
        if found is None:
            continue
        kind, version = found
        if kind == "dist-info" and version:
            return version
        return _metadata_version(name)
    return None


_FOLDERS: dict = {}  # folder -> {normalised distribution name: (dist-info | egg-info, version)}, each listed once


def _distributions(folder):
    """The distributions a folder of sys.path holds, the first of a name in the folder's order kept."""
    import os
    import re
    if folder not in _FOLDERS:
        found: dict = {}
        try:
            names = os.listdir(folder)
        except OSError:
            names = []
        for item in names:
            stem, dot, kind = item.rpartition(".")
            if kind in ("dist-info", "egg-info"):
                dist, _, version = stem.partition("-")
                found.setdefault(re.sub(r"[-_.]+", "_", dist).lower(), (kind, version))
        _FOLDERS[folder] = found
    return _FOLDERS[folder]


def _module_literals(path):
    """The literal top-level assignments of a Python file, read as text (never imported)."""
    import ast
    try:
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read(1000000))
    except (OSError, SyntaxError, ValueError):
        return None
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            values[target] = ast.literal_eval(value)
        except ValueError:
            pass
    return values


def _package_folders(name):
    """Where a top-level package lives, found without importing it."""
    import importlib.util
    try:
        spec = importlib.util.find_spec(name)  # a top-level name: finds, does not import
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def _deepspeed_install_info():
    """installed_ops / torch_info / accelerator_name that DeepSpeed's setup.py wrote into
    deepspeed/git_version_info_installed.py, read as text: the package is located, never imported."""
    import os
    for folder in _package_folders("deepspeed"):
        values = _module_literals(os.path.join(folder, "git_version_info_installed.py"))
        if values is None:
            continue
        info: dict = {}
        ops = values.get("installed_ops")
        if isinstance(ops, dict):  # setup.py writes 1/0 or True/False
            info["installed_ops"] = dict((str(k), bool(v)) for k, v in ops.items())
        torch_info = values.get("torch_info")
        if isinstance(torch_info, dict):
            info["wheel_torch"] = torch_info.get("version")
            info["wheel_cuda"] = torch_info.get("cuda_version")
            if torch_info.get("hip_version") not in (None, "0.0"):
                info["wheel_hip"] = torch_info.get("hip_version")
        if isinstance(values.get("accelerator_name"), str):
            info["accelerator"] = values["accelerator_name"]
        return info
    return {}


def _deepspeed():
    """DeepSpeed's version from package metadata and its pre-built ops from the file its setup.py wrote
    (importing deepspeed costs seconds and may build ops)."""
    facts = {"version": _distribution_version("deepspeed")}
    if facts["version"] is not None:
        try:
            facts.update(_deepspeed_install_info())
        except Exception:  # noqa: BLE001 - a strange install must not cost the torch facts
            pass
    return facts


def _device(torch, index):
    props = torch.cuda.get_device_properties(index)
    device = {"name": props.name, "cc": "%d.%d" % (props.major, props.minor),
              "memory_total_bytes": int(props.total_memory)}
    uuid = getattr(props, "uuid", None)  # torch >= 2.4 (pytorch PR #125083): maps this CUDA ordinal onto NVML's device
    if uuid is not None:
        device["uuid"] = str(uuid)
    return device


def _cuda_facts(torch, facts):
    """CUDA as the job's torch sees it. Before CUDA initialises, torch.cuda.device_count() is NVML's count of the
    GPUs CUDA_VISIBLE_DEVICES names (torch/cuda/__init__.py `_device_count_nvml`, pytorch#83973), which is not
    CUDA's on a MIG node: both are recorded (`device_count_before_init`, `device_count`), CUDA's own after
    `torch.cuda.init()`, and each device is read in its own try (`device_errors`)."""
    facts["device_count_before_init"] = int(torch.cuda.device_count())
    facts["cuda_available"] = bool(torch.cuda.is_available())
    try:
        facts["arch_list"] = list(torch.cuda.get_arch_list())
    except Exception:  # noqa: BLE001 - CPU builds without CUDA support
        facts["arch_list"] = []
    facts["devices"], facts["device_count"] = [], 0
    if not facts["cuda_available"]:
        return
    torch.cuda.init()
    facts["device_count"] = int(torch.cuda.device_count())
    errors = []
    for index in range(facts["device_count"]):
        try:
            facts["devices"].append(_device(torch, index))
        except Exception as exc:  # noqa: BLE001 - one device's failure is a fact about it, not the end
            errors.append({"index": index, "error": "%s: %s" % (type(exc).__name__, exc)})
    if errors:
        facts["device_errors"] = errors


def _nccl_text(code):
    """ncclGetVersion's code as major.minor.patch: nccl.h's NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up to 2.8 and
    X*10000+Y*100+Z from 2.9."""
    if code >= 10000:
        return "%d.%d.%d" % (code // 10000, code % 10000 // 100, code % 100)
    return "%d.%d.%d" % (code // 1000, code % 1000 // 100, code % 100)


def _loaded_library(prefix, maps="/proc/self/maps"):
    """The path of the shared library named `prefix`* this process has loaded (its mapping), or None."""
    import os
    try:
        with open(maps) as handle:
            for line in handle:
                fields = line.split(None, 5)
                if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(prefix):
                    return fields[5].strip()
    except OSError:
        return None
    return None


def _loaded_nccl(facts):
    """The NCCL library torch loaded (not torch.cuda.nccl.version(), the header torch was built with:
    torch/csrc/cuda/nccl.cpp): its path from /proc/self/maps and its ncclGetVersion()."""
    path = _loaded_library("libnccl.so")
    if path is None:
        return
    facts["nccl_library"] = path
    import ctypes
    try:
        code = ctypes.c_int(0)
        if ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
            facts["nccl_loaded"] = _nccl_text(code.value)
    except (OSError, AttributeError):  # no such symbol: a library that is not NCCL's
        pass


CUDA_WHEELS = ("cudnn", "cublas", "nccl", "cuda-runtime", "cusparse", "nvjitlink")


def _cuda_wheels():
    """The nvidia-*-cuXX wheels installed beside torch, by library (what GD111 compares with the loaded ones)."""
    found = {}
    for library in CUDA_WHEELS:
        for major in ("13", "12", "11"):
            version = _distribution_version("nvidia-%s-cu%s" % (library, major))
            if version:
                found[library.replace("-", "_")] = version
                break
    return found


def _base_facts():
    # platform.python_version() is the version sys.version starts with (platform's import costs every run ~3 ms)
    return {"python": sys.executable, "python_version": sys.version.split()[0],
            "deepspeed": _deepspeed(), "ninja": shutil.which("ninja"), "cuda_wheels": _cuda_wheels()}


def collect_quick():
    """Versions only, from torch/version.py and package metadata: no `import torch`, no CUDA init.
    Whether CUDA is usable, the arch list and import errors stay unknown."""
    import os
    facts = _base_facts()
    folders = _package_folders("torch")
    if not folders:
        facts.update(status="missing", error="No module named 'torch'")
        return facts
    for folder in folders:
        values = _module_literals(os.path.join(folder, "version.py"))
        if values and "__version__" in values:
            facts.update(status="ok", error=None, quick=True, version=values["__version__"],
                         cuda=values.get("cuda"), hip=values.get("hip"))
            for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
                nccl = _distribution_version(name)
                if nccl:
                    facts["nccl"] = nccl
                    break
            return facts
    return collect()  # an unusual layout: ask torch itself


def _traceback():
    """The last 2,000 characters of the exception being handled (traceback imported only then: start-up time)."""
    import traceback
    return traceback.format_exc()[-2000:]


def collect():
    facts = _base_facts()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            import torch
        except ImportError as exc:
            if getattr(exc, "name", None) == "torch":
                facts.update(status="missing", error=str(exc))
                return facts
            facts.update(status="broken", error="%s: %s" % (type(exc).__name__, exc), traceback=_traceback())
            return facts
        except Exception as exc:  # noqa: BLE001 - a broken torch is exactly what we report
            facts.update(status="broken", error="%s: %s" % (type(exc).__name__, exc), traceback=_traceback())
            return facts
        facts.update(status="ok", error=None, version=torch.__version__,
                     cuda=getattr(torch.version, "cuda", None), hip=getattr(torch.version, "hip", None))
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        facts["cudnn"] = str(cudnn) if cudnn is not None else None
        try:
            nccl = torch.cuda.nccl.version() if facts["cuda"] else None
            facts["nccl_compiled"] = ".".join(str(part) for part in nccl) if isinstance(nccl, tuple) else (
                str(nccl) if nccl is not None else None)
        except Exception:  # noqa: BLE001 - builds without NCCL
            facts["nccl_compiled"] = None
        _loaded_nccl(facts)
        facts["nccl"] = facts.get("nccl_loaded") or facts["nccl_compiled"]
        try:
            _cuda_facts(torch, facts)
        except Exception as exc:  # noqa: BLE001 - CUDA init failures are facts
            facts["cuda_error"] = "%s: %s" % (type(exc).__name__, exc)
            facts.setdefault("cuda_available", False)
    facts["warnings"] = [str(w.message).strip()[:1000] for w in caught]
    return facts


if __name__ == "__main__":
    if sys.version_info < (3, 6):
        sys.stderr.write("Python %d.%d: gpudoctor inspects Python 3.6 or newer\n" % sys.version_info[:2])
        sys.exit(2)
    # A process that reads and leaves: what it imports lives until it exits, and Python's garbage collector, tracing
    # it again and again, made the job's `import torch` ~8 % slower.
    gc.disable()
    sys.stdout.write(json.dumps(collect_quick() if "--quick" in sys.argv[1:] else collect()))
