"""What a job's environment leaves on or lets in. GD406, GD409: debugging left on: NCCL's own logging
(`NCCL_DEBUG`, `NCCL_DEBUG_SUBSYS`, `NCCL_DEBUG_FILE`) and the switches rules/nccl_env.toml lists under
[[debug_switch]] (`CUDA_LAUNCH_BLOCKING=1`, `TORCH_DISTRIBUTED_DEBUG=DETAIL` …); a setting made only on some paths
of a script is a switch, not a leftover. GD434: an empty entry in PYTHONPATH or LD_LIBRARY_PATH, which puts the
current directory on the search path. GD435: NCCL and tensor-parallel settings on a job of one GPU, where they do
nothing."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts.jobs import one_gpu_only
from gpudoctor.facts.nccl_settings import debug_switch, settings, unique_findings
from gpudoctor.model import EnvChange

# --- GD406 nccl-debug-verbose -----------------------------------------------------------------------------

@check("GD406")
def nccl_debug_verbose(facts, rule):
    findings = []
    all_settings = settings(facts)
    debug_on = False
    for setting in all_settings:
        value = (setting.value or "").strip()
        if setting.conditional:
            continue  # `if [ "$DEBUG" = 1 ]; then export NCCL_DEBUG=INFO; fi` is a switch, not a leftover
        if setting.name == "NCCL_DEBUG" and value.upper() in ("INFO", "TRACE"):
            debug_on = True
            findings.append(rule.finding(
                f"NCCL_DEBUG={value}{setting.where} left on: every rank prints its init, topology and transport "
                "lines" + (" and a trace of every call" if value.upper() == "TRACE" else "")
                + ", slowing start-up and flooding the logs of large jobs", location=setting.location,
                evidence=setting.evidence(),
                fix=rule.fix(applicability="safe", case="debug_on", env=EnvChange(set={"NCCL_DEBUG": "WARN"}))))
        elif setting.name == "NCCL_DEBUG" and value.upper() not in ("", "NONE"):
            debug_on = True
        if setting.name == "NCCL_DEBUG_SUBSYS" and not value.startswith("^") and \
                "ALL" in [t.strip().upper() for t in value.split(",")]:
            findings.append(rule.finding(
                f"NCCL_DEBUG_SUBSYS={value}{setting.where} left on: with NCCL_DEBUG=INFO it logs every subsystem "
                "(collectives, proxy, allocations) instead of the default INIT,BOOTSTRAP,ENV",
                location=setting.location, evidence=setting.evidence(),
                fix=rule.fix(applicability="safe", case="subsys_all", env=EnvChange(unset=("NCCL_DEBUG_SUBSYS",)))))
    if debug_on:
        findings += _shared_debug_files(rule, all_settings)
    return unique_findings(findings)


def _shared_debug_files(rule, all_settings) -> list:
    """NCCL_DEBUG_FILE without %p (the process id) where NCCL logs: every rank of a node writes one file."""
    findings = []
    for setting in all_settings:
        value = setting.value or ""
        if setting.name != "NCCL_DEBUG_FILE" or not value or "%p" in value or setting.conditional or \
                value in ("/dev/stdout", "/dev/stderr"):
            continue
        suffix = ".%h.%p" if "%h" not in value else ".%p"
        findings.append(rule.finding(
            f"NCCL_DEBUG_FILE={value}{setting.where} has no %p: every rank on a node opens and overwrites the "
            "same file, so the log is lost or interleaved", location=setting.location,
            evidence=setting.evidence(),
            fix=rule.fix(applicability="safe", case="debug_file", values={"file": value + suffix},
                         env=EnvChange(set={"NCCL_DEBUG_FILE": value + suffix}))))
    return findings

# --- GD409 debug-env-left-on -----------------------------------------------------------------------------

@check("GD409")
def debug_env_left_on(facts, rule):
    findings = []
    for setting in settings(facts):
        item = None if setting.conditional else debug_switch(setting.name, setting.value)
        if item is None or setting.value is None:  # debug_switch finds none without a value
            continue
        value = setting.value.strip()
        findings.append(rule.finding(
            f"{setting.name}={value}{setting.where} is a debugging switch left on: {item['why']}",
            location=setting.location, evidence=setting.evidence(),
            fix=rule.fix(applicability=item.get("fix", "safe"), values={"variable": setting.name},
                         env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)


# --- GD434 search-path-current-directory ------------------------------------------------------------------

SEARCH_PATHS = {"PYTHONPATH": "Python imports modules", "LD_LIBRARY_PATH": "the dynamic loader loads libraries"}


@check("GD434")
def search_path_current_directory(facts, rule):
    findings = []
    for setting in settings(facts):
        value = setting.value
        if setting.name not in SEARCH_PATHS or value is None or "$" in value or "" not in value.split(":"):
            continue
        kept = ":".join(part for part in value.split(":") if part)
        findings.append(rule.finding(
            f"{setting.name}={value}{setting.where} has an empty entry (a leading, trailing or doubled ':'), which "
            f"means the current directory: {SEARCH_PATHS[setting.name]} from whatever folder the job starts in, "
            "before the installed ones (a file named like a package there shadows it)",
            location=setting.location, evidence=setting.evidence(),
            fix=rule.fix(applicability="safe", values={"variable": setting.name, "value": kept},
                         env=EnvChange(set={setting.name: kept}) if kept else EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)


# --- GD435 distributed-settings-one-gpu -------------------------------------------------------------------

ONE_GPU_NOOPS = {  # variable (or prefix) -> what it changes, which a job of one GPU does not have
    "NCCL_": "NCCL's communication between GPUs",
    "TORCH_NCCL_": "how torch drives NCCL's collectives",
    "CUDA_DEVICE_MAX_CONNECTIONS": "the order of communication and compute kernels that tensor parallelism overlaps",
}


@check("GD435")
def distributed_settings_one_gpu(facts, rule):
    findings = []
    for setting in settings(facts):
        what = next((why for name, why in ONE_GPU_NOOPS.items()
                     if setting.name == name or name.endswith("_") and setting.name.startswith(name)), None)
        if what is None or setting.conditional or setting.location is None \
                or not one_gpu_only(facts, setting.record.get("path")):
            continue
        findings.append(rule.finding(
            f"{setting.name}={setting.value if setting.value is not None else setting.record.get('value')}"
            f"{setting.where} is set for a job of one process on one GPU: it tunes {what}, which this job does not "
            "have, so it does nothing here (harmless; set it where the job runs on several GPUs)",
            location=setting.location, evidence=setting.evidence(),
            fix=rule.fix(values={"variable": setting.name}, env=EnvChange(unset=(setting.name,)))))
    return unique_findings(findings)
