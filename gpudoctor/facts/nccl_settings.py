"""NCCL variable knowledge (rules/nccl_env.toml) and the settings a job gets, with where each is set."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Iterable, List, Optional, Tuple

from gpudoctor.knowledge import table, version
from gpudoctor.model import Location

SCOPED_PREFIXES = ("NCCL_", "TORCH_NCCL_")
TRUE_WORDS = {"true", "yes", "on", "y", "enable", "enabled"}
FALSE_WORDS = {"false", "no", "off", "n", "disable", "disabled"}


# --- knowledge ----------------------------------------------------------------------------------------------

def knowledge() -> dict:
    return table("nccl_env")


def tuning() -> dict:
    """The performance knobs and the vendors' network profiles (rules/nccl_env.toml `[tuning]`)."""
    return knowledge().get("tuning", {})


def is_tuning_knob(name: str) -> bool:
    return name in tuning().get("knobs", [])


def spec(name: str) -> Optional[dict]:
    return knowledge().get("var", {}).get(name)


@cache  # of the table, which is read once (knowledge.table)
def known_names() -> Tuple[frozenset, tuple]:
    """Every name something reads, and the prefixes plugins and tools own."""
    data = knowledge()
    names = set(data.get("var", {})) | set(data.get("nccl_src", {}))
    prefixes: List[str] = []
    for plugin in data.get("plugin", {}).values():
        names |= set(plugin.get("reads", []))
        prefixes += plugin.get("prefixes", [])
    names |= set(data.get("tools", {}).get("names", []))
    prefixes += data.get("tools", {}).get("prefixes", [])
    return frozenset(names), tuple(prefixes)


def meta(key: str) -> str:
    return str(knowledge().get("meta", {}).get(key, ""))


# --- the settings the job gets -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One variable the job gets: its name, its value, where it is set and how (`record`)."""

    name: str
    value: Optional[str]  # None: not a literal (verbatim text in record["value"])
    location: Optional[Location]
    record: dict = field(default_factory=dict, compare=False, hash=False)
    effective: bool = True

    @property
    def conditional(self) -> bool:
        """Set only on some paths (an if/case branch, after && or ||, a shell function): a deliberate switch."""
        return bool(self.record.get("conditional"))

    @property
    def where(self) -> str:
        context = self.record.get("context")
        return f" ({context})" if context else ""

    def evidence(self, **extra) -> dict:
        data = {"variable": self.name, "value": self.value if self.value is not None else self.record.get("value")}
        if self.location:
            data["path"], data["line"] = self.location.path, self.location.line
        if self.record.get("context"):
            data["context"] = self.record["context"]
        data.update(extra)
        return data


def location_of(record: dict) -> Optional[Location]:
    if record and record.get("path"):
        return Location(str(record["path"]), record.get("line"))
    return None


def settings(facts, include_shadowed: bool = False) -> List[Setting]:
    """Every assignment of every variable: the winning ones, then the others files make (other containers,
    other files, conditional branches); earlier assignments overridden in the same scope only on request."""
    env = facts.get("env")
    sources = facts.get("env_sources", {}) or {}
    result: List[Setting] = []
    for name, value in env.items():
        record = sources.get(name) or {}
        result.append(Setting(name, None if value is None else str(value), location_of(record), record, True))
    for name, record in sources.items():
        if not isinstance(record, dict):
            continue
        if name not in env and not record.get("unset"):
            result.append(Setting(name, None, location_of(record), record, True))
        for other in record.get("also", []) or []:
            if other.get("unset") or (other.get("shadowed") and not include_shadowed):
                continue
            value = None if other.get("unresolved") else other.get("value")
            result.append(Setting(name, value, location_of(other), other, False))
    return result


def value_of(facts, name: str) -> Optional[str]:
    """The effective literal value of one variable (None when unset or unknown)."""
    value = facts.get("env", {}).get(name)
    return None if value is None else str(value)


def unique_findings(findings: Iterable) -> list:
    seen, out = set(), []
    for finding in findings:
        key = (finding.message, finding.location)
        if key not in seen:
            seen.add(key)
            out.append(finding)
    return out


# --- versions -------------------------------------------------------------------------------------------

def nccl_in_use(facts):
    return version(facts.get("torch.nccl", None))


def torch_in_use(facts):
    return version(facts.get("torch.version", None))


def owner_version(facts, owner: str):
    return torch_in_use(facts) if owner == "torch" else nccl_in_use(facts)


def owner_floor(owner: str):
    return version(meta("torch_floor") if owner == "torch" else meta("nccl_floor"))


def owner_label(owner: str) -> str:
    return "torch" if owner == "torch" else "NCCL"


def affected(facts, owner: str, since: Optional[str]) -> Optional[bool]:
    """Whether the version in use is at or after `since`: True/False when known (or when every version in use is,
    because `since` predates the floor), None when it cannot be told."""
    wanted = version(since)
    if wanted is None:
        return True
    floor = owner_floor(owner)
    if floor is not None and wanted <= floor:
        return True
    have = owner_version(facts, owner)
    if have is None:
        return None
    return have >= wanted


def debug_switch(name: str, value: Optional[str]) -> Optional[dict]:
    """The rules/nccl_env.toml [[debug_switch]] entry that `name=value` turns on, else None."""
    item = next((entry for entry in knowledge().get("debug_switch", []) if entry["name"] == name), None)
    if item is None or value is None:
        return None
    value = value.strip()
    if "contains" in item:
        return item if any(needle in value for needle in item["contains"]) else None
    values = item.get("values", [])
    if "*" in values:
        return item if value else None
    return item if value.lower() in [v.lower() for v in values] else None
