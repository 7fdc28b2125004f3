"""GD426: Transformer Engine variables (NVTE_*) that TE does not read — misspelt, or removed in a release
(rules/te_env.toml, generated from TransformerEngine's sources by tools/gen_te_env.py) — and the layernorm SM
margins, which reserve SMs for communication, set for a job of one GPU that has none; FP8 settings where nothing
runs FP8."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts.jobs import jobs, one_gpu_only
from gpudoctor.facts.nccl_settings import settings
from gpudoctor.knowledge import table
from gpudoctor.model import EnvChange, Severity
from gpudoctor.spelling import closest

SM_MARGINS = ("NVTE_FWD_LAYERNORM_SM_MARGIN", "NVTE_BWD_LAYERNORM_SM_MARGIN", "NVTE_INF_LAYERNORM_SM_MARGIN")


def _fp8_only(name: str) -> bool:
    """A TE setting that only matters when FP8 runs (its recipe, scaling, amax history or reduction)."""
    return "FP8" in name or "AMAX" in name


def _no_fp8(facts) -> bool:
    """The job's scripts were read and none asks for FP8 (fp8_autocast, an FP8 recipe or precision), nor does any
    job's command line (`--fp8-format`, `precision=fp8…`)."""
    scripts = facts.get("scripts", None) or []
    if not scripts or facts.get("requests.fp8", None):
        return False
    return not any("fp8" in str(job.get("command", "")).lower() for job in jobs(facts))


@check("GD426")
def transformer_engine_env(facts, rule):
    te = table("te_env")
    known, removed, newest = set(te["known"]), te["removed"], te["meta"]["newest"]
    for setting in settings(facts):
        name = setting.name
        if not name.startswith("NVTE_"):
            continue
        unset = rule.fix(case="remove", values={"variable": name}, env=EnvChange(unset=(name,)))
        if name in removed:
            yield rule.finding(
                f"{name}{setting.where}: Transformer Engine stopped reading it in {removed[name]} (still read by "
                "earlier releases): with a newer TE it does nothing", severity=Severity.INFO,
                location=setting.location, evidence=setting.evidence(removed=removed[name]), fix=unset)
        elif name not in known and not any(name.startswith(k) for k in known if k.endswith("_")):
            close = closest(name, sorted(known), 0.8)
            hint = f"; did you mean {close[0]}?" if close else ""
            fix = rule.fix(case="rename", values={"variable": name, "replacement": close[0]},
                           env=EnvChange(set={close[0]: setting.value or ""}, unset=(name,))) \
                if close and setting.value is not None else unset
            yield rule.finding(
                f"{name}{setting.where} is not a variable Transformer Engine reads (none of TE {newest}'s, nor a "
                f"removed one){hint}", location=setting.location, evidence=setting.evidence(suggestion=close[0]
                                                                                          if close else None),
                fix=fix)
        elif _fp8_only(name) and _no_fp8(facts):
            yield rule.finding(
                f"{name}{setting.where} tunes Transformer Engine's FP8 path, but no script of the job runs FP8 "
                "(no fp8_autocast, FP8 recipe or fp8 precision, nothing about fp8 on its command lines): it has no "
                "effect", severity=Severity.INFO, location=setting.location, evidence=setting.evidence(), fix=unset)
        elif name in SM_MARGINS and setting.value not in (None, "", "0") \
                and one_gpu_only(facts, setting.record.get("path")):
            yield rule.finding(
                f"{name}={setting.value}{setting.where} keeps {setting.value} SMs free for communication kernels "
                "that overlap the layernorm (tensor/sequence-parallel comm overlap), but the job runs one process "
                "on one GPU: there is no communication, and the layernorm only loses those SMs",
                severity=Severity.INFO, location=setting.location, evidence=setting.evidence(), fix=unset)
