"""The rule catalog: rule metadata and docs from `rules/catalog/*.toml`, joined to the check functions."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Mapping, NamedTuple, Optional, Tuple

from gpudoctor.data import load_tomls, rules_dir
from gpudoctor.errors import InputError
from gpudoctor.model import Applicability, Finding, Fix, Location, Severity

RULE_ID = re.compile(r"^GD[0-9]{3}$")
PLACEHOLDER = re.compile(r"<([^<>\s]+)>")


class Family(NamedTuple):
    """The rules whose IDs share a first digit: `name` (a finding's `family`), what they judge, and the modules of
    gpudoctor/checks/ that hold their code (none holds another family's; tests/test_catalog.py checks it)."""

    name: str
    what: str
    modules: Tuple[str, ...]


FAMILIES = {  # ID prefix -> family; docs/rules.md lists them
    "GD0": Family("doctor", "gpudoctor itself: a probe or a rule that failed, an input it could not read, a "
                  "suppression that names no rule", ("doctor",)),
    "GD1": Family("driver-cuda", "the NVIDIA driver, CUDA, torch's build and the CUDA libraries it loads",
                  ("driver_cuda", "libraries")),
    "GD2": Family("precision", "bf16 and fp8 against the GPUs' compute capability", ("precision",)),
    "GD3": Family("deepspeed", "DeepSpeed's config, its ops and their builds, and CUDA extension builds",
                  ("deepspeed", "extension_build")),
    "GD4": Family("nccl", "NCCL and the other communication settings (names, values, interfaces, P2P, debugging, "
                  "tensor parallelism, tuning), what NCCL's logs show, and a run's ranks read together",
                  ("nccl", "nccl_network", "p2p", "debug_env", "tensor_parallel", "nccl_tuning", "nccl_logs",
                   "te_env", "postmortem")),
    "GD5": Family("memory-host", "GPU and host memory, the host's limits, the GPUs' health and how a run died",
                  ("memory", "host", "run_failures")),
    "GD6": Family("script", "the training script and how it is launched: launchers, ranks, rendezvous, sbatch and "
                  "job specs", ("script", "script_args", "launch", "local_rank", "rank_device", "rank_data",
                                 "rendezvous", "sbatch", "replicas")),
    "GD7": Family("bench", "what `gpudoctor bench` measured", ("bench",)),
    "GD8": Family("fleet", "the nodes of one job compared (`check --fleet`, `gpudoctor fleet`) and tested together "
                  "(`gpudoctor preflight`)", ("fleet", "preflight")),
    "GD9": Family("job-spec", "Kubernetes and container specs: shared memory, EFA and RDMA resources",
                  ("k8s",)),
}


def family_of(rule_id: str) -> Optional[Family]:
    return FAMILIES.get(rule_id[:3])


def _family_modules(rule_id: str) -> Optional[Tuple[str, ...]]:
    family = family_of(rule_id)
    return family.modules if family else None


_LOGIC: Dict[str, Tuple[Callable, Optional[Callable]]] = {}


def _logic(rule_id: str) -> Tuple[Optional[Callable], Optional[Callable]]:
    """(check, log reader) that gpudoctor/checks/ registers for the rule (gpudoctor.checks.registered_check), looked
    up once per rule: a check, once registered, is never replaced (a second one for an ID is refused)."""
    if rule_id not in _LOGIC:
        from gpudoctor.checks import registered_check

        found = registered_check(rule_id, _family_modules(rule_id))
        if found[0] is None:  # none (yet): asked again next time
            return found
        _LOGIC[rule_id] = found  # type: ignore[assignment]
    return _LOGIC[rule_id]


@dataclass(frozen=True)
class Input:
    """Something a rule judges that a run may not have: a file the user gives, a benchmark, several nodes. A rule
    declares it in its catalog file (`input = "ds_config"`, or a list: any one of them given is enough); without
    it the rule is not applicable (`reason`), neither passed nor unknown."""

    reason: str
    least: int = 1  # how many entries a list must hold to count as given (a fleet of one node compares nothing)
    # a fact of the machine rather than a file: "not given" only when recorded empty (`"cuda": null`) and this
    # (path, value) says the machine has none (no NVIDIA driver, a CPU-only torch); merely unknown (a pasted report
    # without it, a failed probe), the rule runs and is unknown
    absent_when: Optional[Tuple[str, str]] = None


INPUTS = {  # in the order the report names them: what the machine lacks first, then the files a user gives
    "nvml.gpus": Input("no NVIDIA driver", absent_when=("nvml.status", "unavailable")),
    "nvml.driver_version": Input("no NVIDIA driver", absent_when=("nvml.status", "unavailable")),
    "torch.cuda": Input("CPU-only torch", absent_when=("torch.status", "ok")),
    "torch.devices": Input("no CUDA device", absent_when=("torch.status", "ok")),
    "ds_config": Input("no DeepSpeed config"),
    "scripts": Input("no script"),
    "launch": Input("no launch command"),  # a .env given is a file, but starts no job
    "logs": Input("no log"),
    "model": Input("no model"),
    "fleet.nodes": Input("no fleet", least=2),
    "preflight.nodes": Input("no preflight"),
    "preflight.gpus": Input("no preflight GPU phase"),
    "preflight.fabric": Input("no preflight fabric phase"),
    "bench.nccl": Input("no NCCL benchmark"),
    "nvml.topology": Input("no GPU topology"),
    "bench.train": Input("no training benchmark"),
    "requests.fp8": Input("no fp8 request"),
    "requests.tensor_parallel": Input("no tensor parallelism"),
    "requests.adapters": Input("no PEFT adapter"),
    "env.ACCELERATE_MIXED_PRECISION": Input("no ACCELERATE_MIXED_PRECISION"),
    "env.TENSOR_MODEL_PARALLEL_SIZE": Input("no TENSOR_MODEL_PARALLEL_SIZE"),
    "probes": Input("no machine looked at"),
    "run.ranks": Input("no logs of several ranks", least=2),
}

# What part of a run a log shows (gpudoctor.ingest.logs records them as `logs.shows`). A rule that judges only a
# log declares the parts its verdict needs (`log_shows = ["nccl"]`): a log without any of them leaves it unknown,
# for the absence of a failure proves nothing where the log never reached the step that would have printed it.
LOG_PARTS = {  # each part as the report says "the log does not show …"
    "nccl": "NCCL's setup (NCCL INFO lines)",
    "kernel": "kernel messages",
    "run": "training progress",
    "exit": "how the processes ended",
    "build": "an extension build",
}


@dataclass(frozen=True)
class Example:
    """A documented case: `facts` must make the rule fire (or not)."""

    name: str
    fires: bool
    facts: Mapping[str, Any]
    severity: Optional[str] = None


@dataclass(frozen=True)
class Rule:
    """One catalog entry. `check(facts, rule)` yields findings; `needs` are the fact paths it reads."""

    id: str
    name: str
    severity: Severity
    family: str
    summary: str
    needs: tuple
    host: bool
    fix_applicability: str
    docs: Mapping[str, Any]
    examples: tuple = ()
    own_check: Optional[Callable] = field(default=None, compare=False, repr=False)  # a site policy rule's logic
    optional: tuple = ()  # fact paths read when present; unlike `needs`, they never start a probe
    inputs: tuple = ()  # what the rule judges (INPUTS): with none of them given, it is not applicable
    log_shows: tuple = ()  # LOG_PARTS: a verdict from log facts alone needs the log to show one of them

    @property
    def check(self) -> Optional[Callable]:
        """The rule's logic: a site policy rule's own, else what gpudoctor/checks/ registers for its ID (the
        modules of its family are imported the first time, not the whole package); None where there is none."""
        if self.own_check is not None:
            return self.own_check
        return _logic(self.id)[0]

    @property
    def from_log(self) -> Optional[Callable]:
        """What a log proves for the rule (`check(..., from_log=fn)`), or None."""
        if self.own_check is not None:
            return None
        return _logic(self.id)[1]

    def finding(
        self,
        message: str,
        *,
        evidence: Optional[Mapping[str, Any]] = None,
        fix: Optional[Fix] = None,
        severity: Optional[Severity] = None,
        location: Optional[Location] = None,
    ) -> Finding:
        """A finding of this rule, at its default severity unless told otherwise."""
        return Finding(
            rule=self.id,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            family=self.family,
            evidence=dict(evidence or {}),
            fix=fix,
            location=location,
        )

    def fix(self, *, case: str = "", values: Optional[Mapping[str, Any]] = None, applicability: str = "",
            text: Optional[str] = None, **kwargs) -> Fix:
        """A Fix with this rule's default applicability unless told otherwise. Its text is the catalog's
        (`fix_text(case, values)`); `text` is a site policy's own, rendered from the policy file (gpudoctor.policy)."""
        value = applicability or self.fix_applicability
        if value == "none":
            value = "display-only"
        summary = text if text is not None else self.fix_text(case, values or {})
        return Fix(summary=summary, applicability=Applicability(value), **kwargs)

    def fix_text(self, case: str = "", values: Mapping[str, Any] = {}) -> str:  # noqa: B006 - never mutated
        """`docs.fix`, or `docs.fixes[case]` where the remedy depends on the case, with each `<name>` of `values`
        filled in (other `<…>` stay as written: placeholders for the user)."""
        template = self.docs["fixes"][case] if case else self.docs["fix"]
        for name in values:
            if f"<{name}>" not in template:
                raise ValueError(f"{self.id}: the fix text has no <{name}>")
        # one pass: a filled-in value (a user's variable name or value) is never searched for placeholders again
        return PLACEHOLDER.sub(lambda match: str(values.get(match.group(1), match.group(0))), template)


def _with_nulls(facts: dict, paths: Iterable[str]) -> dict:
    """TOML has no null: an example lists in `nulls` the fact paths that are known to be None."""
    for path in paths:
        *parents, last = path.split(".")
        node = facts
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = None
    return facts


def _inputs(data: dict) -> tuple:
    value = data.get("input", ())
    inputs = (value,) if isinstance(value, str) else tuple(value)
    unknown = [name for name in inputs if name not in INPUTS]
    if unknown:
        raise ValueError(f"{data.get('id')}: input {unknown[0]!r} is not one of {', '.join(INPUTS)}")
    return inputs


def _log_shows(data: dict) -> tuple:
    parts = tuple(data.get("log_shows", ()))
    unknown = [name for name in parts if name not in LOG_PARTS]
    if unknown:
        raise ValueError(f"{data.get('id')}: log_shows {unknown[0]!r} is not one of {', '.join(LOG_PARTS)}")
    return parts


def _rule_from_toml(data: dict) -> Rule:
    examples = tuple(
        Example(
            name=item.get("name", ""),
            fires=bool(item["fires"]),
            facts=_with_nulls(item.get("facts", {}), item.get("nulls", [])),
            severity=item.get("severity"),
        )
        for item in data.get("examples", [])
    )
    family = family_of(data["id"])
    return Rule(
        id=data["id"],
        name=data["name"],
        severity=Severity.parse(data["severity"]),
        family=data.get("family") or (family.name if family else "other"),
        summary=data["summary"],
        needs=tuple(data.get("needs", [])),
        optional=tuple(data.get("optional", [])),
        inputs=_inputs(data),
        log_shows=_log_shows(data),
        host=bool(data.get("host", True)),
        fix_applicability=data.get("fix_applicability", "display-only"),
        docs=data.get("docs", {}),
        examples=examples,
    )


@lru_cache(maxsize=1)
def load_catalog() -> tuple:
    """All rules, sorted by ID, read through the parse cache (gpudoctor.data.load_tomls). No check module is
    imported here: a rule's code is imported with its family's modules when it first runs (Rule.check)."""
    paths = sorted((rules_dir() / "catalog").glob("GD*.toml"))
    return tuple(sorted((_rule_from_toml(data) for data in load_tomls(paths)), key=lambda rule: rule.id))


def find_rule(rule_id: str) -> Optional[Rule]:
    wanted = rule_id.strip().upper()
    return next((rule for rule in load_catalog() if rule.id == wanted), None)


def rule_json(rule: Rule, full: bool = False) -> dict:
    """One rule as `gpudoctor rules --format json` lists it; `full`: as `explain --format json` shows it, with its
    documentation (fix cases included) and its firing and passing examples."""
    data: Dict[str, Any] = {"id": rule.id, "name": rule.name, "severity": str(rule.severity), "family": rule.family,
            "summary": rule.summary, "fix_applicability": rule.fix_applicability}
    if full:
        data.update(needs=list(rule.needs), optional=list(rule.optional), host=rule.host, docs=dict(rule.docs),
                    examples=[{"name": example.name, "fires": example.fires, "severity": example.severity,
                               "facts": dict(example.facts)} for example in rule.examples])
    return data


def catalog_json(rules: Iterable[Rule]) -> dict:
    """The `gpudoctor rules --format json` document."""
    return {"schema": "gpudoctor.rules/1", "rules": [rule_json(rule) for rule in rules]}


def closest_rules(code: str, rule_ids: Iterable[str]) -> List[str]:
    """The real rule IDs closest to a mistyped one (`GD1O1` → GD101), best first, at most three."""
    import difflib

    wanted = code.strip().upper()
    scored = [(difflib.SequenceMatcher(None, wanted, rule_id).ratio(), len(os.path.commonprefix([wanted, rule_id])),
               rule_id) for rule_id in sorted(set(rule_ids))]
    return [rule_id for ratio, _, rule_id in sorted(scored, key=lambda item: (-item[0], -item[1])) if ratio >= 0.6][:3]


_RULE_ID_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9]{0,11}")  # GD304, SITE001, a typo (GD4O6); no token


def quoted_id(text: str) -> str:
    """A rule ID or prefix as an error line quotes it (`'GD999'`); text of any other shape, perhaps a token pasted by
    mistake, is never echoed."""
    return repr(text) if _RULE_ID_SHAPE.fullmatch(text) else "<not shown: not a rule ID>"


def unmatched_code(codes: Iterable[str], rule_ids: Iterable[str]) -> Optional[str]:
    """Why the first of `codes` (rule IDs or prefixes, as --select/--ignore take them) that matches no rule is
    wrong, naming the closest real IDs; None when every code matches a rule."""
    rule_ids = sorted(set(rule_ids))
    for code in (c.strip() for c in codes if c.strip()):
        if any(rule_id.startswith(code.upper()) for rule_id in rule_ids):
            continue
        close = closest_rules(code, rule_ids)
        hint = f"did you mean {', '.join(close)}?" if close else "`gpudoctor rules` lists them"
        return f"{quoted_id(code)} matches no rule ({hint})"
    return None


def select_rules(rules: Iterable[Rule], select: Iterable[str] = (), ignore: Iterable[str] = ()) -> list:
    """Prefix selection, most specific prefix wins (flake8's decision engine); on a tie, ignore wins."""
    select = [code.strip().upper() for code in select if code.strip()] or ["GD"]
    ignore = [code.strip().upper() for code in ignore if code.strip()]

    def longest(prefixes: list, rule_id: str) -> int:
        return max((len(p) for p in prefixes if rule_id.startswith(p)), default=-1)

    chosen = []
    for rule in rules:
        selected, ignored = longest(select, rule.id), longest(ignore, rule.id)
        if selected >= 0 and selected > ignored:
            chosen.append(rule)
    return chosen


def needed_groups(rules: Iterable[Rule]) -> set:
    """The fact groups (first path segment) the rules read, e.g. {"nvml", "torch", "env"}."""
    return {need.split(".")[0] for rule in rules for need in rule.needs}


def rules_for_run(select: Iterable[str] = (), ignore: Iterable[str] = (), site: Iterable[Rule] = (),
                  host: bool = True) -> list:
    """The rules a run evaluates, for the command line and the library alike: the catalog and a site policy's
    rules, narrowed by `select`/`ignore` ID prefixes (by default every rule: GD and the policy's letters, SITE),
    without the machine rules when `host` is false. A code that matches no rule is an InputError naming its flag:
    a typo must never turn into a report that judged nothing."""
    site = tuple(site)
    known = load_catalog() + site
    select = [code for code in select if code.strip()]
    ignore = [code for code in ignore if code.strip()]
    for flag, codes in (("--select", select), ("--ignore", ignore)):
        problem = unmatched_code(codes, [rule.id for rule in known])
        if problem:
            raise InputError(f"{flag}: {problem}")
    rules = select_rules(known, select or ["GD"] + [rule.id.rstrip("0123456789") for rule in site], ignore)
    return rules if host else [rule for rule in rules if not rule.host]


RULES_PAGE = """# Rules

`gpudoctor rules` lists the catalog and `gpudoctor explain ID` prints what a rule checks, why it matters, how to
fix it and its references. Each rule is a TOML file in [`rules/catalog/`](../rules/catalog/) with a firing and a
passing example that the test suite runs. A rule that judges only something a run may not have — a DeepSpeed
config, a script, job files, a log, a model, a benchmark, several nodes, an fp8 or tensor-parallel request, an
NVIDIA driver, a CUDA build of torch — names it in its file (`input`) and is *not applicable* without it, never
passed ([output.md](output.md)); `gpudoctor explain ID` says which.

This page is generated from the catalog (`python -m gpudoctor.catalog > docs/rules.md`). A rule's family is the
first digit of its ID, and its code is in one of its family's modules of `gpudoctor/checks/`. A new rule starts
with `python tools/new_rule.py GDnnn name`, which writes its catalog entry and the stub of its check.

| IDs | family | what it judges | code in `gpudoctor/checks/` |
| --- | --- | --- | --- |
"""


def markdown() -> str:
    """docs/rules.md: the families, then each family's rules with their default severity and summary."""
    rules = load_catalog()
    out = [RULES_PAGE.rstrip("\n")]
    for prefix, family in FAMILIES.items():
        modules = ", ".join(f"`{module}.py`" for module in family.modules)
        out.append(f"| {prefix}xx | {family.name} | {family.what} | {modules} |")
    for prefix, family in FAMILIES.items():
        out += ["", f"## {prefix}xx {family.name}", "", "| ID | name | severity | summary |",
                "| --- | --- | --- | --- |"]
        out += [f"| {rule.id} | {rule.name} | {rule.severity} | {rule.summary} |"
                for rule in rules if rule.id.startswith(prefix)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
