"""GD3xx: DeepSpeed's op builds against the toolchain, and DeepSpeed configs against what DeepSpeed does with them.

Facts: `env` (DS_* variables), `nvcc`, `torch` (with `torch.deepspeed` and `torch.ninja`), `host.libaio`, and
`ds_config` (one object, or a list when several configs were read; see gpudoctor.readers.ds_config).
Tables: rules/deepspeed_env.toml (build variables, the CUDA minor-skew allow-list, ops per optimizer) and
rules/deepspeed_config.toml (the keys DeepSpeed knows, generated from DeepSpeed itself).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, Dict, Iterator, List, Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.cuda import resolved, toolkit_version_at, torch_cuda
from gpudoctor.facts.devices import job_gpus
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.knowledge import Release, major_minor, table, version
from gpudoctor.model import EnvChange, Location, Severity
from gpudoctor.redact import cut
from gpudoctor.spelling import closest

AUTO = "auto"
MAX_LISTED = 6
MAX_KEY_FINDINGS = 20


# --- shared helpers ----------------------------------------------------------------------------------------

def configs(facts) -> List[dict]:
    """The DeepSpeed configs given (`--ds-config`, lint), parsed or not; [] when none was given."""
    value = facts.get("ds_config", None)
    if not value:
        return []
    return [item for item in (value if isinstance(value, list) else [value]) if isinstance(item, dict)]


def parsed_configs(facts) -> List[Tuple[dict, dict]]:
    """(fact, config) for every config that could be read as a JSON object."""
    return [(item, item["config"]) for item in configs(facts) if isinstance(item.get("config"), dict)]


def where(item: dict, key: Optional[str] = None, column: Optional[int] = None) -> Location:
    """The location of a key (dotted path) in a config, falling back to its parents' lines."""
    lines = item.get("lines") or {}
    line = None
    path = key
    while path and line is None:
        line = lines.get(path)
        path = path.rpartition(".")[0]
    return Location(str(item.get("path", "ds_config")), line, column)


def _section(config: dict, path: str) -> Any:
    node: Any = config
    for part in path.split(".") if path else ():
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _number(value: Any) -> Optional[float]:
    """A JSON number (an int or a float, not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _object(value: Any) -> Dict[str, Any]:
    """A JSON object, else {} (a section that is absent or not an object sets nothing)."""
    return value if isinstance(value, dict) else {}


def zero_stage(config: dict) -> Any:
    zero = config.get("zero_optimization")
    if isinstance(zero, bool):  # the deprecated `"zero_optimization": true` form is stage 1
        return 1 if zero else 0
    if not isinstance(zero, dict):
        return 0
    return zero.get("stage", 0)


def _device(section: Any) -> Optional[str]:
    if isinstance(section, dict) and isinstance(section.get("device"), str):
        return section["device"].lower()
    return None


def needed_ops(config: dict) -> List[Tuple[str, str]]:
    """[(op, why)] of the DeepSpeed ops a training config makes DeepSpeed load."""
    ops: List[Tuple[str, str]] = []
    zero = _object(config.get("zero_optimization"))
    stage = _number(zero_stage(config))
    offload_opt = _device(zero.get("offload_optimizer")) in ("cpu", "nvme")
    optimizer = _object(config.get("optimizer"))
    name = str(optimizer.get("type", "")).lower()
    params = _object(optimizer.get("params"))
    row = table("deepspeed_env").get("ops_for_optimizer", {}).get(name)
    if row and not (name in ("adam", "adamw") and params.get("torch_adam") is True):
        op = row.get("offload" if offload_opt else "gpu")
        if op:
            how = "with offload_optimizer" if offload_opt else "on the GPU"
            ops.append((op, f'"optimizer": {optimizer.get("type")} {how}'))
    nvme = [path for path, section in (("offload_optimizer", zero.get("offload_optimizer")),
                                       ("offload_param", zero.get("offload_param")))
            if _device(section) == "nvme" and (path == "offload_optimizer" or stage == 3)]
    if nvme:
        ops.append(("async_io", f"NVMe offload ({', '.join(nvme)})"))
    return ops


def ds_toolkit(facts) -> Tuple[Optional[str], Optional[str], str]:
    """(CUDA_HOME, its nvcc major.minor, how it was found) as DeepSpeed's op builder sees them: it uses
    torch.utils.cpp_extension.CUDA_HOME (CUDA_HOME, else CUDA_PATH, else the nvcc on PATH, else /usr/local/cuda)
    and runs $CUDA_HOME/bin/nvcc -V. CUDA_HOME None: there is no toolkit. Version None with a CUDA_HOME: the
    directory does not exist. Raises MissingFact when the nvcc facts were not gathered."""
    home = facts.get("nvcc.cuda_home", None) or facts.get("nvcc.cuda_path", None) or \
        facts.env("CUDA_HOME") or facts.env("CUDA_PATH")
    nvcc_version = major_minor(facts.get("nvcc.version", None))
    if nvcc_version and not facts.has("nvcc.path"):
        # a pasted `nvcc --version` or ds_report's "nvcc version" line: the version the builder runs, not its path
        return home, nvcc_version, "the nvcc --version given"
    nvcc_path = facts.get("nvcc.path")
    if home:
        return _toolkit_at_home(facts, home, nvcc_path, nvcc_version)
    if nvcc_path:
        if nvcc_version is None:
            raise MissingFact("nvcc.version")
        return _toolkit_root(nvcc_path), nvcc_version, nvcc_path
    for toolkit in facts.get("nvcc.toolkits", []):
        if resolved(facts, toolkit.get("path") or "") == resolved(facts, "/usr/local/cuda") and toolkit.get("version"):
            return "/usr/local/cuda", major_minor(toolkit["version"]), "/usr/local/cuda/bin/nvcc"
    return None, None, "no CUDA_HOME and no nvcc on PATH"


def _toolkit_at_home(facts, home: str, nvcc_path, nvcc_version) -> Tuple[Optional[str], Optional[str], str]:
    """ds_toolkit where CUDA_HOME (or CUDA_PATH) is set: the version of the toolkit there, that of the nvcc on PATH
    when it is the same toolkit, or None where the directory does not exist."""
    at_home = toolkit_version_at(facts, home)
    if at_home:
        return home, at_home, f"{home}/bin/nvcc"
    if nvcc_path and resolved(facts, _toolkit_root(nvcc_path)) == resolved(facts, home):
        if nvcc_version is None:
            raise MissingFact("nvcc.version")
        return home, nvcc_version, nvcc_path
    known = [t for t in facts.get("nvcc.toolkits", []) if resolved(facts, t.get("path") or "") ==
             resolved(facts, home)]
    if known or not facts.has("nvcc.toolkits"):
        raise MissingFact("nvcc.toolkits.version")
    return home, None, f"{home}/bin/nvcc"


def _toolkit_root(nvcc_path: str) -> str:
    """`/usr/local/cuda-12.4` for `/usr/local/cuda-12.4/bin/nvcc`."""
    return posixpath.dirname(posixpath.dirname(nvcc_path))


def ds_rejects(nvcc: str, torch_cuda: str) -> bool:
    """Whether DeepSpeed's assert_no_cuda_mismatch refuses nvcc X.Y with torch CUDA X'.Y' (without the skip)."""
    if nvcc == torch_cuda:
        return False
    ours, theirs = Release(nvcc), Release(torch_cuda)  # major.minor (or a major) as ds_toolkit and torch_cuda give
    if ours.major != theirs.major:
        return True
    allowed = table("deepspeed_env").get("cuda_minor_mismatch_ok", {}).get(str(ours.major), [])
    return not (nvcc in allowed and torch_cuda in allowed)


def _deepspeed_installed(facts) -> Optional[bool]:
    """True/False when known, None when DeepSpeed was not looked at."""
    ds = facts.get("torch.deepspeed", None)
    if not isinstance(ds, dict) or "version" not in ds:
        return None
    return ds.get("version") is not None


def _ops_phrase(facts) -> str:
    ops = sorted({f"{op} for {why}" for _, config in parsed_configs(facts) for op, why in needed_ops(config)})
    return f" (here: {', '.join(ops)})" if ops else ""


# --- GD301-GD303, GD308: the toolchain -----------------------------------------------------------------------

def _build_requests(facts) -> Tuple[List[str], List[str]]:
    """(variables that ask for pre-compiled ops, variables setup.py cannot read as integers)."""
    build_vars = table("deepspeed_env").get("build_vars", {})
    on, bad = [], []
    for name in ["DS_BUILD_OPS"] + sorted(build_vars):
        value = facts.env(name)
        if value is None or value == "":  # setup.py's get_env_if_set treats "" as unset
            continue
        try:
            enabled = int(value) != 0
        except ValueError:
            bad.append(f"{name}={value}")
            continue
        if enabled:
            on.append(f"{name}={value}")
    return on, bad


def ds_build_ops_toolchain_in_log(facts, rule):
    for event in log_events(facts, "cuda_home_missing")[:1]:
        yield rule.finding(
            f"the log shows DeepSpeed could not build its CUDA ops: no CUDA toolkit (CUDA_HOME, nvcc) was found: "
            f"{event['line']}", evidence=cited(event),
            fix=rule.fix(case="log_no_toolkit"))


@check("GD301", from_log=ds_build_ops_toolchain_in_log)
def ds_build_ops_toolchain(facts, rule):
    on, bad = _build_requests(facts)
    if bad:
        yield rule.finding(
            f"{', '.join(bad)}: DeepSpeed's setup.py reads build variables with int(), so `pip install deepspeed` "
            "stops with ValueError: invalid literal for int()",
            evidence={"variables": bad},
            fix=rule.fix(case="invalid_build_variable", applicability="unsafe",
                         env=EnvChange(set={v.split("=")[0]: "0" for v in bad})))
    if not on:
        return
    if facts.get("torch.status") == "missing":
        yield rule.finding(
            f"{', '.join(on)} pre-compiles DeepSpeed's ops at install time, but torch is not installed in "
            f"{facts.get('torch.python', None) or 'the job interpreter'}: setup.py asserts \"Unable to pre-compile "
            "ops without torch installed\"",
            evidence={"variables": on},
            fix=rule.fix(case="torch_missing"))
        return
    runtime = torch_cuda(facts)
    if runtime is None:
        return  # CPU or ROCm torch: DeepSpeed builds CPU/HIP ops, no nvcc involved
    home, nvcc, how = ds_toolkit(facts)
    unset = tuple(v.split("=")[0] for v in on if not v.startswith("DS_BUILD_OPS="))
    fix_env = EnvChange(set={"DS_BUILD_OPS": "0"}, unset=unset)
    install = f'conda install -c "nvidia/label/cuda-{runtime}.0" cuda-toolkit'
    evidence = {"variables": on, "cuda_home": home, "nvcc": nvcc, "torch_cuda": runtime}
    if home is None:
        problem = ("there is no CUDA toolkit: CUDA_HOME is unset and there is no nvcc on PATH, so "
                   "torch.utils.cpp_extension.CUDA_HOME is None (MissingCUDAException \"CUDA_HOME does not exist\") "
                   "and the CUDA ops cannot be compiled")
    elif nvcc is None:
        problem = f"CUDA_HOME={home} does not exist, so $CUDA_HOME/bin/nvcc cannot run (MissingCUDAException)"
    elif ds_rejects(nvcc, runtime):
        problem = (f"nvcc {nvcc} ({how}) does not match torch's CUDA {runtime}: the op builder raises "
                   "CUDAMismatchException (GD102)")
        if facts.env("DS_SKIP_CUDA_CHECK") == "1":
            problem = (f"nvcc {nvcc} ({how}) does not match torch's CUDA {runtime}; DS_SKIP_CUDA_CHECK=1 lets the "
                       "build start, and it fails or produces ops that mis-link (GD303)")
    else:
        return
    yield rule.finding(
        f"{', '.join(on)} pre-compiles DeepSpeed's ops during `pip install deepspeed`, but {problem}",
        evidence=evidence,
        fix=rule.fix(values={"cuda": runtime}, applicability="unsafe", env=fix_env, commands=(install,)))


def ds_jit_needs_ninja_in_log(facts, rule):
    for event in log_events(facts, "ninja_missing")[:1]:
        yield rule.finding(f"the log shows a JIT op build failed for lack of ninja: {event['line']}",
                           evidence=cited(event), fix=rule.fix())


@check("GD302", from_log=ds_jit_needs_ninja_in_log)
def ds_jit_needs_ninja(facts, rule):
    installed = _deepspeed_installed(facts)
    if installed is None:
        raise MissingFact("torch.deepspeed.version")
    if not installed:
        return
    if facts.get("torch.ninja"):
        return
    ds = facts.get("torch.deepspeed")
    prebuilt = ds.get("installed_ops")
    prebuilt = prebuilt if isinstance(prebuilt, dict) else None
    needs = [(op, why) for _, config in parsed_configs(facts) for op, why in needed_ops(config)]
    if needs:
        missing = sorted({op for op, _ in needs if not (prebuilt or {}).get(op)})
        if not missing:
            return
        what = ", ".join(f"{op} ({why})" for op, why in needs if op in missing)
        known = "not pre-built" if prebuilt is not None else "not known to be pre-built"
        message = f"this config needs {what}, {known} in DeepSpeed {ds.get('version')}"
        first = missing[0]
    else:
        if prebuilt is not None and any(prebuilt.values()):
            return  # some ops were pre-built (DS_BUILD_OPS=1); which others a job needs is not known here
        message = (f"DeepSpeed {ds.get('version')} has no pre-built ops" if prebuilt is not None else
                   f"DeepSpeed {ds.get('version')}'s ops are not known to be pre-built (the default pip install "
                   "pre-builds none)")
        first = "cpu_adam"
    yield rule.finding(
        f"{message}, and ninja is not on the job's PATH: the first use JIT-compiles the op and fails with "
        f"\"Unable to JIT load the {first} op due to ninja not being installed\"",
        evidence={"deepspeed": ds.get("version"), "installed_ops": prebuilt, "ninja": None},
        fix=rule.fix(commands=("pip install ninja",)))


@check("GD303")
def ds_skip_cuda_check_masks_mismatch(facts, rule):
    if facts.env("DS_SKIP_CUDA_CHECK") != "1":  # builder.py: os.getenv("DS_SKIP_CUDA_CHECK", "0") == "1"
        return
    if _deepspeed_installed(facts) is False:
        return
    runtime = torch_cuda(facts)
    if runtime is None:
        return
    home, nvcc, how = ds_toolkit(facts)
    if nvcc is None or not ds_rejects(nvcc, runtime):
        return
    ours, theirs = Release(nvcc), Release(runtime)
    what = f"major {ours.major} vs {theirs.major}" if ours.major != theirs.major else \
        f"CUDA {theirs.major} minors DeepSpeed does not accept together"
    prebuilt = (facts.get("torch.deepspeed", None) or {}).get("installed_ops")
    build = facts.env("DS_BUILD_OPS")
    when = ("JIT-built at first use" if not (isinstance(prebuilt, dict) and any(prebuilt.values()))
            else "built (JIT or at install)")
    if build not in (None, "") and build.strip() == "0":
        when += " (DS_BUILD_OPS=0)"
    yield rule.finding(
        f"DS_SKIP_CUDA_CHECK=1 silences DeepSpeed's check of nvcc {nvcc} ({how}) against torch CUDA {runtime} "
        f"({what}); the problem remains: ops{_ops_phrase(facts)} are {when} with nvcc {nvcc} against torch's "
        f"CUDA {runtime} headers and fail to compile or mis-link",
        evidence={"nvcc": nvcc, "cuda_home": home, "torch_cuda": runtime, "DS_SKIP_CUDA_CHECK": "1"},
        fix=rule.fix(applicability="unsafe", env=EnvChange(unset=("DS_SKIP_CUDA_CHECK",))))


@check("GD308")
def ds_aio_unavailable(facts, rule):
    nvme = [(item, config, why) for item, config in parsed_configs(facts) for op, why in needed_ops(config)
            if op == "async_io"]
    if not nvme:
        return
    libaio = facts.get("host.libaio")
    if not isinstance(libaio, dict):
        raise MissingFact("host.libaio")
    prebuilt = ((facts.get("torch.deepspeed", None) or {}).get("installed_ops") or {}).get("async_io") is True
    if prebuilt:
        if libaio.get("library"):
            return
        lacking = "the libaio shared library (libaio.so.1) that the pre-built async_io op links against"
    else:
        if libaio.get("dev_library") and libaio.get("header"):
            return
        parts = [name for name, have in (("libaio.so", libaio.get("dev_library")), ("libaio.h", libaio.get("header")))
                 if not have]
        lacking = (f"{' and '.join(parts)} (the libaio development files) that DeepSpeed needs to JIT-build its "
                   "async_io op (\"async_io requires the dev libaio .so object and headers but these were not found\")")
    for item, config, why in nvme:
        zero = config.get("zero_optimization", {})
        keys = [f"zero_optimization.{name}.device" for name in ("offload_optimizer", "offload_param")
                if _device(zero.get(name)) == "nvme"]
        key = min(keys, key=lambda k: where(item, k).line or 0)
        yield rule.finding(
            f"{why} is configured, but this machine lacks {lacking}: DeepSpeed fails when it sets up NVMe swapping",
            evidence={"libaio": dict(libaio), "async_io_prebuilt": prebuilt},
            location=where(item, key),
            fix=rule.fix(commands=("sudo apt-get install -y libaio-dev",)))


# --- GD304-GD307, GD309: the config ------------------------------------------------------------------------

@check("GD304")
def ds_offload_param_needs_zero3(facts, rule):
    for item, config in parsed_configs(facts):
        zero = config.get("zero_optimization")
        if not isinstance(zero, dict):
            continue
        stage = _number(zero.get("stage", 0))
        if stage is None or stage >= 3:
            continue  # "auto" or a non-number: GD309 / DeepSpeed's own validation
        offload = zero.get("offload_param")
        device = _device(offload)
        key = "zero_optimization.offload_param"
        if offload is None or device == "none" or (isinstance(offload, dict) and device is None and not offload):
            if zero.get("cpu_offload_param") is not True:
                continue
            key, device = "zero_optimization.cpu_offload_param", "cpu"
        stage_text = int(stage) if float(stage).is_integer() else stage
        yield rule.finding(
            f"{key.split('.')[-1]} ({device or 'default device'}) is ignored at ZeRO stage {stage_text}: DeepSpeed "
            "offloads parameters only at stage 3, so they stay on the GPU",
            evidence={"stage": stage, "offload_param_device": device},
            location=where(item, key),
            fix=rule.fix(values={"key": key.split(".")[-1]}))


@check("GD305")
def ds_precision_conflict(facts, rule):
    for item, config in parsed_configs(facts):
        bf16_key = "bf16" if "bf16" in config else "bfloat16"
        fp16, bf16 = config.get("fp16"), config.get(bf16_key)
        if not (isinstance(fp16, dict) and isinstance(bf16, dict)):
            continue
        if fp16.get("enabled") is True and bf16.get("enabled") is True:
            fp16_line = where(item, "fp16.enabled").line
            yield rule.finding(
                f'"fp16" and "{bf16_key}" are both enabled (fp16 at line {fp16_line}): DeepSpeed asserts '
                "\"bfloat16 and fp16 modes cannot be simultaneously enabled\" at initialize",
                evidence={"fp16.enabled": True, f"{bf16_key}.enabled": True},
                location=where(item, f"{bf16_key}.enabled"),
                fix=rule.fix())


def _world_size(facts) -> Tuple[Optional[int], str]:
    """(processes, where the number comes from); (None, why) when it is not known."""
    value = facts.env("WORLD_SIZE")
    if value not in (None, ""):
        try:
            return int(value), f"WORLD_SIZE={value}"
        except ValueError:
            pass
    visible = facts.env("CUDA_VISIBLE_DEVICES")
    if facts.get("nvml.gpus", None) is None:
        devices = facts.get("torch.devices", None)  # torch ran under the job's CUDA_VISIBLE_DEVICES
        if not devices:
            return None, "no WORLD_SIZE and no GPU count"
        return len(devices), f"{len(devices)} GPU(s) torch sees"
    job = job_gpus(facts)
    if job.basis == "none":
        return None, f"CUDA_VISIBLE_DEVICES={visible!r} hides every GPU"
    if not job.devices or not job.counted:
        return None, "no WORLD_SIZE and no GPU count" if visible is None else "CUDA_VISIBLE_DEVICES cannot be counted"
    where = {"uuid": "GPU(s) torch sees", "cuda_visible_devices": f"GPU(s) CUDA_VISIBLE_DEVICES={visible} selects",
             "nvidia_visible_devices": "GPU(s) NVIDIA_VISIBLE_DEVICES selects",
             "slurm_gpus": "GPU(s) SLURM gave the job", "all": "GPU(s) on this machine"}[job.basis]
    return len(job.devices), f"{len(job.devices)} {where}"


def _integer(value: Any) -> Optional[int]:
    number = _number(value)
    if number is None or not float(number).is_integer():
        return None
    return int(number)


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, n + 1) if n % d == 0] if 0 < n <= 1_000_000 else [n]


@check("GD306")
def ds_batch_size_inconsistent(facts, rule):
    unknown_world = False
    for item, config in parsed_configs(facts):
        raw = {name: config[name] for name in BATCH_SETTINGS if config.get(name) is not None}
        if any(v == AUTO for v in raw.values()):
            continue  # the HF integration computes them (GD309)
        evidence: Dict[str, Any] = {n: raw.get(n) for n in BATCH_SETTINGS}
        found = _invalid_batch_setting(rule, item, raw, evidence) or _batch_not_a_product(facts, rule, item, raw,
                                                                                          evidence)
        if found is UNKNOWN_WORLD:
            unknown_world = True
        elif found is not None:
            yield found
    if unknown_world:
        raise MissingFact("env.WORLD_SIZE")


BATCH_SETTINGS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")
UNKNOWN_WORLD = object()  # the batch settings can only be judged with the world size, which is not known


def _invalid_batch_setting(rule, item, raw: dict, evidence: dict):
    """A batch setting that is not a positive integer (DeepSpeed raises TypeError or asserts)."""
    odd = [n for n in BATCH_SETTINGS if n in raw and (_integer(raw[n]) or 0) <= 0]  # not an integer, or not > 0
    if not odd:
        return None
    name, value = odd[0], raw[odd[0]]
    problem = ("a string: DeepSpeed compares it with integers and raises TypeError" if isinstance(value, str)
               else "not a positive integer: DeepSpeed asserts every batch setting is > 0 and multiplies them")
    return rule.finding(f"{name} is {json_text(value)}, {problem}", evidence=evidence, location=where(item, name),
                        fix=rule.fix(case="not_positive_integer", values={"name": name}))


def _batch_not_a_product(facts, rule, item, raw: dict, evidence: dict):
    """train_batch_size that is not micro × accumulation × the data-parallel size: a finding, None, or
    UNKNOWN_WORLD."""
    train = _integer(raw.get("train_batch_size"))
    if train is None:
        return None  # DeepSpeed derives it from micro × accumulation × world size: always consistent
    micro = _integer(raw.get("train_micro_batch_size_per_gpu"))
    gas = _integer(raw.get("gradient_accumulation_steps"))
    unit = (micro or 1) * (gas or 1)
    given = " × ".join(f"{n} {v}" for n, v in (("train_micro_batch_size_per_gpu", micro),
                                                ("gradient_accumulation_steps", gas)) if v is not None)
    location = where(item, "train_batch_size")
    if train % unit:
        return rule.finding(
            f"train_batch_size {train} is not a multiple of {given} = {unit}: no number of GPUs makes "
            "train_batch_size == micro × accumulation × world size, which DeepSpeed asserts",
            evidence=evidence, location=location,
            fix=rule.fix(case="not_a_multiple", values={"unit": unit}))
    world, source = _world_size(facts)
    evidence.update(world_size=world, world_size_from=source)
    if world is None or world <= 0:
        return UNKNOWN_WORLD
    return _batch_world_mismatch(rule, location, evidence, train, micro, gas, given, world, source)


def _batch_world_mismatch(rule, location, evidence: dict, train: int, micro, gas, given: str, world: int,
                          source: str):
    """train_batch_size against micro × accumulation × `world` (from WORLD_SIZE, or the GPU count)."""
    exact = micro is not None and gas is not None  # otherwise DeepSpeed derives the missing factor by //
    unit = (micro or 1) * (gas or 1)
    per_rank = train // unit  # = the data-parallel size when exact, a multiple of it otherwise

    def fits(dp: int) -> bool:
        return per_rank == dp if exact else per_rank % dp == 0

    from_env = source.startswith("WORLD_SIZE")
    if fits(world) or (not from_env and exact and per_rank % world == 0):
        return None  # (with a GPU count, per_rank = k × GPUs is k nodes of this machine)
    # with all three given the data-parallel size is pinned down; a smaller one that fits means model parallelism
    smaller = [d for d in _divisors(world) if 1 < d < world and fits(d)] if exact else []
    if exact:
        wrong = f"train_batch_size {train} ≠ {given} × world size {world} ({source}) = {unit * world}"
        target = unit * world
    else:
        missing = "gradient_accumulation_steps" if micro is not None else "train_micro_batch_size_per_gpu"
        wrong = (f"train_batch_size {train} is not divisible by {given + ' × ' if given else ''}world size "
                 f"{world} ({source}): DeepSpeed derives {missing} by integer division and the product no longer "
                 "equals train_batch_size")
        target = unit * world * max(per_rank // world, 1)
    if smaller:
        severity = Severity.WARNING
        tail = (f"; it holds only with a data-parallel size of {smaller[-1]} (tensor/pipeline/sequence "
                f"parallelism of {world // smaller[-1]}), which DeepSpeed uses instead of the world size")
    else:
        severity = Severity.ERROR if from_env else Severity.WARNING
        tail = "" if from_env else " (assuming one process per GPU)"
    return rule.finding(
        f"{wrong}{tail}: DeepSpeed asserts \"train_batch_size is not equal to micro_batch_per_gpu * "
        "gradient_acc_step * world_size\"",
        evidence=evidence, location=location, severity=severity,
        fix=rule.fix(case="world_size", values={"batch": target, "world": world}))


def json_text(value: Any) -> str:
    try:
        return cut(json.dumps(value), 60)
    except (TypeError, ValueError):
        return cut(repr(value), 60)


def _key_table() -> Tuple[Dict[str, Tuple[bool, List[str]]], Dict[str, dict], Dict[str, dict]]:
    data = table("deepspeed_config")
    sections = {s["path"]: (bool(s.get("strict")), list(s.get("keys", []))) for s in data.get("section", [])}
    removed = {r["key"]: r for r in data.get("removed", [])}
    renamed = {r["key"]: r for r in data.get("renamed", [])}
    return sections, removed, renamed


def _since_severity(facts, since: str, at_full: Severity) -> Optional[Severity]:
    """`at_full` when the DeepSpeed in use is at or past `since`, None when it is older (the key still works),
    INFO when its version is not known (lint): version-dependent rules never fire at full severity on a guess."""
    ds = facts.get("torch.deepspeed", None)
    installed = version(ds.get("version")) if isinstance(ds, dict) and ds.get("version") else None
    if installed is None:
        return Severity.INFO
    return at_full if installed >= Release(since) else None


@check("GD307")
def ds_config_invalid(facts, rule):
    for item in configs(facts):
        path = str(item.get("path", "ds_config"))
        error = item.get("error")
        if error:
            at = Location(path, error.get("line"), error.get("column"))
            yield rule.finding(
                f"cannot be parsed: {error.get('message')}"
                + (f" (line {at.line}, column {at.column})" if at.line else "")
                + ". HF Trainer, accelerate, Lightning and Megatron read DeepSpeed configs with json.load (strict "
                  "JSON); DeepSpeed itself reads a config path with hjson, which also allows comments and trailing "
                  "commas",
                evidence=dict(error), location=at,
                fix=rule.fix(case="parse_error"))
            continue
        lenient = item.get("hjson_only")
        if lenient:
            at = Location(path, lenient.get("line"), lenient.get("column"))
            yield rule.finding(
                f"not strict JSON: a {lenient.get('what')} at line {at.line}, column {at.column}. DeepSpeed accepts "
                "it when given the path (it reads configs with hjson), but the HF Trainer, accelerate, Lightning "
                f"and Megatron load configs with json.load and stop with \"{lenient.get('json_error')}\"",
                evidence=dict(lenient), location=at, severity=Severity.WARNING,
                fix=rule.fix(case="not_strict_json"))
        for duplicate in item.get("duplicates") or []:
            yield rule.finding(
                f"\"{duplicate['key']}\" is given twice (lines {duplicate.get('first_line')} and {duplicate['line']}): "
                "DeepSpeed refuses the config (\"Duplicate keys in DeepSpeed config\"), json.load keeps the last "
                "value silently",
                evidence=dict(duplicate), location=Location(path, duplicate.get("line")),
                fix=rule.fix(case="duplicate_key", values={"key": duplicate["key"].split(".")[-1]}))
        config = item.get("config")
        if isinstance(config, dict):
            yield from _unknown_keys(facts, rule, item, config)
            yield from _bad_enum_values(rule, item, config)
            yield from _sections_not_objects(rule, item, config)


def _accepted(value: Any, allowed: list) -> bool:
    """Whether DeepSpeed's pydantic model takes `value` for an Enum field (lax mode: `"3"`, `3.0` and `True` are
    numbers; strings match exactly). `"auto"` is GD309's."""
    if value == AUTO:
        return True
    if all(isinstance(a, int) for a in allowed):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, float) and value % 1 == 0:  # inf and nan are not (and int() would raise)
            value = int(value)
        return isinstance(value, int) and int(value) in allowed
    return isinstance(value, str) and value in allowed


def _bad_enum_values(rule, item: dict, config: dict) -> Iterator:
    for entry in table("deepspeed_config").get("enum", []):
        parent, _, key = entry["key"].rpartition(".")
        section = _section(config, parent)
        if not isinstance(section, dict) or key not in section or _accepted(section[key], entry["values"]):
            continue
        allowed = ", ".join(json.dumps(value) for value in entry["values"])
        yield rule.finding(
            f"\"{entry['key']}\" is {json.dumps(section[key])}: DeepSpeed accepts only {allowed} and raises "
            "ValidationError (\"Input should be …\")",
            evidence={"key": entry["key"], "value": section[key], "allowed": entry["values"]},
            location=where(item, entry["key"]), severity=Severity.ERROR,
            fix=rule.fix(case="bad_value", values={"key": key, "allowed": allowed}))


def _sections_not_objects(rule, item: dict, config: dict) -> Iterator:
    """A section given a scalar or a list (`"offload_optimizer": true`, `"fp16": true`): DeepSpeed builds each section
    from a dict and stops. `null` means the default; `"zero_optimization": true/false` is its old stage-1/0 form."""
    for section_path in _key_table()[0]:
        parent, _, key = section_path.rpartition(".")
        holder = _section(config, parent) if section_path else None
        if not isinstance(holder, dict) or key not in holder:
            continue
        value = holder[key]
        if value is None or isinstance(value, dict) or (section_path == "zero_optimization" and
                                                        isinstance(value, bool)):
            continue
        yield rule.finding(
            f"\"{section_path}\" is {json.dumps(value)}, not an object of settings: DeepSpeed builds this section from "
            "a dict and stops (ValidationError \"Input should be a valid dictionary\", TypeError or AttributeError)",
            evidence={"key": section_path, "value": value},
            location=where(item, section_path), severity=Severity.ERROR,
            fix=rule.fix(case="section_not_object", values={"key": key}))


def _related(path: str, section_path: str) -> bool:
    """Whether a key found in `section_path` may have been meant for `path`: a section above it or inside it
    ("stage" at the top level, "aio" in zero_optimization, "device" in zero_optimization), not a stranger ("type" in
    fp16 is no optimizer setting)."""
    return (not path or not section_path or path.startswith(section_path + ".")
            or section_path.startswith(path + "."))


def _unknown_keys(facts, rule, item: dict, config: dict) -> Iterator:
    """Each key DeepSpeed does not know where it stands: renamed, removed, or unknown (at most MAX_KEY_FINDINGS)."""
    table = _KeyTable(facts, rule, item, *_key_table())
    count = 0
    for section_path, (strict, known) in table.sections.items():
        section = _section(config, section_path)
        if not isinstance(section, dict):
            continue
        for key in section:
            full = f"{section_path}.{key}" if section_path else key
            if key in known or key.startswith(("_", "//", "#")):
                continue  # "_comment"-style keys are how people annotate JSON
            if full in table.renamed or full in table.removed:
                finding = table.renamed_key(full) if full in table.renamed else table.removed_key(full, key)
                if finding is not None:
                    yield finding
                continue
            count += 1
            if count > MAX_KEY_FINDINGS:
                return
            yield table.unknown_key(full, key, section_path, strict, known)


class _KeyTable:
    """DeepSpeed's config keys by section (rules/deepspeed_config.toml) and the finding for each kind of stray key."""

    def __init__(self, facts, rule, item: dict, sections: dict, removed: dict, renamed: dict):
        self.facts, self.rule, self.item = facts, rule, item
        self.sections, self.removed, self.renamed = sections, removed, renamed
        self.ds = (facts.get("torch.deepspeed", None) or {}).get("version")

    def renamed_key(self, full: str):
        entry = self.renamed[full]
        severity = _since_severity(self.facts, entry["since"], Severity.WARNING)
        if severity is None:
            return None
        scope = f"DeepSpeed {self.ds} ignores the old name silently" if severity == Severity.WARNING else \
            "from then on the old name is ignored silently (the DeepSpeed version in use is unknown)"
        return self.rule.finding(
            f"\"{full}\" was renamed to \"{entry['new']}\" in DeepSpeed {entry['since']}: {scope}",
            evidence={"key": full, "renamed_to": entry["new"], "since": entry["since"], "deepspeed": self.ds},
            location=where(self.item, full), severity=severity,
            fix=self.rule.fix(case="renamed_key", values={"new": entry["new"], "since": entry["since"]}))

    def removed_key(self, full: str, key: str):
        since = self.removed[full]["since"]
        severity = _since_severity(self.facts, since, Severity.ERROR)
        if severity is None:
            return None
        scope = (f"DeepSpeed {self.ds}" if severity == Severity.ERROR
                 else f"DeepSpeed ≥ {since} (version in use unknown)")
        return self.rule.finding(
            f"\"{full}\" is rejected by {scope}: {self.removed[full]['message']}",
            evidence={"key": full, "removed_in": since, "deepspeed": self.ds},
            location=where(self.item, full), severity=severity,
            fix=self.rule.fix(case="removed_key", values={"key": key, "since": since}))

    def unknown_key(self, full: str, key: str, section_path: str, strict: bool, known):
        close = closest(key, known, 0.6)
        lead = f"unknown key \"{key}\" " + (f"in \"{section_path}\"" if section_path else "at the top level")
        home = [path for path, (_, keys) in self.sections.items() if key in keys and path != section_path
                and _related(path, section_path)]
        homes = '" or "'.join(home)
        if home:
            lead += f" (it belongs inside \"{homes}\")" if home[0] else " (it belongs at the top level)"
        elif close:
            lead += f" (did you mean \"{close[0]}\"?)"
        if strict:
            severity = Severity.ERROR
            message = f"{lead}: DeepSpeed validates this section and raises ValidationError \"Extra inputs are " \
                      "not permitted\""
        else:
            severity = Severity.WARNING
            message = f"{lead}: DeepSpeed ignores it silently, so the setting has no effect"
        return self.rule.finding(
            message,
            evidence={"key": full, "suggestion": close[0] if close else None, "strict_section": strict},
            location=where(self.item, full), severity=severity,
            fix=self.rule.fix(case=("misplaced_key" if home[0] else "move_to_top_level") if home else
                              "misspelled_key" if close else "unknown_key",
                              values=({"section": homes} if home[0] else {}) if home else {"suggestion": close[0]}
                              if close else {"key": key}))


def _autos(node: Any, path: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _autos(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _autos(value, f"{path}.{index}" if path else str(index))
    elif node == AUTO:
        yield path


@check("GD309")
def ds_config_auto_values(facts, rule):
    strict = {path for path, (is_strict, _) in _key_table()[0].items() if is_strict}  # "auto" is dropped there
    batch = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"}
    for item, config in parsed_configs(facts):
        autos = list(_autos(config))
        if not autos:
            continue
        shown = ", ".join(autos[:MAX_LISTED]) + (f", … ({len(autos) - MAX_LISTED} more)" if len(autos) > MAX_LISTED
                                                 else "")
        dropped = [p for p in autos if p.rpartition(".")[0] in strict]
        strings = [p for p in autos if p not in dropped and p not in batch]
        effects = []
        if batch & set(autos):
            effects.append("\"auto\" batch sizes raise TypeError ('>' not supported between 'str' and 'int')")
        if strings:
            effects.append(f"{', '.join(strings[:3])}{' …' if len(strings) > 3 else ''} reach DeepSpeed or torch as "
                           "the string \"auto\"")
        if dropped:
            sections = ", ".join(sorted({p.rpartition(".")[0] for p in dropped}))
            off = " (so fp16/bf16 stay off)" if any(p.endswith(("fp16.enabled", "bf16.enabled")) for p in dropped) \
                else ""
            effects.append(f"those inside {sections} are dropped and DeepSpeed's defaults apply{off}")
        yield rule.finding(
            f"\"auto\" in {len(autos)} place(s) ({shown}): only the HF Trainer/accelerate integration fills these in"
            + (f"; with a plain deepspeed.initialize {'; '.join(effects)}" if effects else ""),
            evidence={"auto": autos}, location=where(item, autos[0]),
            fix=rule.fix())


# --- GD311: stage-3 keys below stage 3 ----------------------------------------------------------------------

@check("GD311")
def ds_stage3_keys_ignored(facts, rule):
    """Keys only ZeRO-3 reads (rules/deepspeed_config.toml `stage3_only`, derived from DeepSpeed's code) set in a
    config at stage 0, 1 or 2. offload_param is GD304's."""
    stage3_keys = set(table("deepspeed_config").get("stage3_only", {}).get("keys", []))
    for item, config in parsed_configs(facts):
        zero = config.get("zero_optimization")
        stage = _number(zero_stage(config))
        if not isinstance(zero, dict) or stage is None or stage >= 3:
            continue  # "auto" or a non-number: GD309 / GD307
        keys = [key for key in zero if key in stage3_keys]
        if not keys:
            continue
        stage_text = int(stage) if float(stage).is_integer() else stage
        shown = ", ".join(f'"{key}"' for key in keys[:MAX_LISTED]) + (" …" if len(keys) > MAX_LISTED else "")
        one = len(keys) == 1
        yield rule.finding(
            f"{shown} {'is' if one else 'are'} read only by ZeRO stage 3; at stage {stage_text} DeepSpeed ignores "
            f"{'it, so it tunes' if one else 'them, so they tune'} nothing",
            evidence={"stage": stage, "stage3_keys": keys},
            location=where(item, f"zero_optimization.{keys[0]}"),
            fix=rule.fix(values={"keys": shown}))


# --- GD312: optimizer offload with PEFT adapters ---------------------------------------------------------------

def _offloaded_optimizer(zero: dict) -> Tuple[Optional[str], str]:
    """(device, key) of the optimizer offload a zero_optimization section asks for; (None, "") for none."""
    device = _device(zero.get("offload_optimizer"))
    if device in ("cpu", "nvme"):
        return device, "zero_optimization.offload_optimizer"
    if zero.get("cpu_offload") is True and zero.get("offload_optimizer") is None:  # the deprecated spelling
        return "cpu", "zero_optimization.cpu_offload"
    return None, ""


def _starts(job: dict, script: dict) -> bool:
    analysed = (job.get("script") or {}).get("analysed_as")
    return bool(analysed) and posixpath.normpath(str(analysed)) == posixpath.normpath(str(script.get("path")))


def _job_names_deepspeed(job: dict) -> bool:
    """A launch job that starts the deepspeed launcher or passes `--deepspeed` to its script."""
    args = (job.get("script") or {}).get("args") or []
    return any(launcher.get("name") == "deepspeed" for launcher in job.get("launchers") or []) or \
        any(str(arg).startswith("--deepspeed") for arg in args)


def _script_may_use_deepspeed(script: dict, jobs: List[dict]) -> bool:
    """A script that imports DeepSpeed or gives the HF Trainer a config, or whose HF Trainer takes its arguments from
    a command line that no job file read shows in full."""
    trainer = (script.get("launch") or {}).get("hf_trainer") or {}
    if "deepspeed" in (script.get("frameworks") or []) or trainer.get("deepspeed"):
        return True
    shown = [job for job in jobs if _starts(job, script) and (job.get("script") or {}).get("args_known")]
    return bool(trainer.get("command_line")) and not shown


def _may_use_deepspeed(facts) -> bool:
    """Whether the job may run DeepSpeed with a config that was not read."""
    jobs = facts.get("launch.jobs", None) or []
    return any(_job_names_deepspeed(job) for job in jobs) or \
        any(_script_may_use_deepspeed(script, jobs) for script in facts.get("scripts", None) or [])


def _passes(job: dict, option: str) -> bool:
    """Whether a job's command line turns a boolean option on (`--use_peft`, `--use_peft true`, `--use_peft=1`)."""
    args = [str(arg) for arg in (job.get("script") or {}).get("args") or []]
    for index, arg in enumerate(args):
        if arg == option or arg.startswith(option + "="):
            value = arg.partition("=")[2] if "=" in arg else (args[index + 1] if index + 1 < len(args) else "")
            return value.lower() not in ("false", "0", "no")
    return False


def _trained_adapters(facts, adapters: List[dict]) -> List[dict]:
    """The adapters the job trains: those the script always makes, and those that depend on a command-line option
    (TRL's get_peft_config and `--use_peft`) where a job that starts the script passes it."""
    jobs = facts.get("launch.jobs", None) or []
    return [adapter for adapter in adapters if not adapter.get("option") or any(
        _starts(job, {"path": adapter.get("source")}) and _passes(job, str(adapter["option"])) for job in jobs)]


@check("GD312")
def ds_offload_optimizer_peft_adapters(facts, rule):
    """ZeRO optimizer offload where the script trains PEFT adapters: the state it moves is the adapters' alone."""
    adapters = _trained_adapters(facts, facts.get("requests.adapters"))
    if not adapters:
        return  # TRL's get_peft_config without --use_peft: no adapter
    if not configs(facts) and _may_use_deepspeed(facts):
        raise MissingFact("ds_config")  # the job may have a DeepSpeed config that was not read
    shown = ", ".join(f"{str(a.get('what')).split('(')[0]}(…) at {a.get('source')}:{a.get('line')}"
                      for a in adapters[:2])
    for item, config in parsed_configs(facts):
        zero = config.get("zero_optimization")
        stage = _number(zero_stage(config))
        device, key = _offloaded_optimizer(zero) if isinstance(zero, dict) else (None, "")
        if device is None or stage is None or stage < 1:
            continue
        yield rule.finding(
            f"{key.split('.')[-1]} moves the optimizer to the {device.upper() if device == 'cpu' else 'NVMe'} while "
            f"the script trains PEFT adapters ({shown}): only the adapters are trainable, so the optimizer state "
            "moved is small, yet every step copies their gradients to the host and runs the optimizer there",
            evidence={"offload_optimizer_device": device, "stage": stage,
                      "adapters": [f"{a.get('source')}:{a.get('line')}" for a in adapters[:MAX_LISTED]]},
            location=where(item, key),
            fix=rule.fix(values={"key": key.split(".")[-1]}))
