"""Helpers shared by the report parsers: a fact builder that records evidence, version and size parsing."""

from __future__ import annotations

import copy
import re
from typing import Any, Dict, List, Optional, Tuple

MAX_EVIDENCE_CHARS = 160
QUOTE_CHARS = 240  # of a log line an event quotes

# Values that collect_env, nvidia-smi and ds_report print when they could not find something.
NOT_COLLECTED = {"could not collect", "n/a", "unknown", "", "not available", "[not supported]", "not supported"}

_VERSION = re.compile(r"\d+(?:\.\d+)+")
_CU_TAG = re.compile(r"\+cu(\d{2,3})(?![0-9])")
_CPU_TAG = re.compile(r"\+cpu(?![a-z0-9])")
_ROCM_TAG = re.compile(r"\+rocm(\d+(?:\.\d+)*)")



def quote(line: str) -> str:
    """A log line as an event quotes it: cut at QUOTE_CHARS."""
    return line if len(line) <= QUOTE_CHARS else line[:QUOTE_CHARS] + "..."


def first_version(value: Optional[str]) -> Optional[str]:
    """The first dotted version in a string ('535.104.05 [Deprecated]' -> '535.104.05')."""
    if not value:
        return None
    m = _VERSION.search(value[:200])
    return m.group(0) if m else None


def cuda_from_cu_digits(digits: str) -> Optional[str]:
    """'113' -> '11.3', '121' -> '12.1', '92' -> '9.2', '130' -> '13.0'."""
    if not digits.isdigit():
        return None
    if len(digits) == 2:
        return f"{digits[0]}.{digits[1]}"
    if len(digits) == 3:
        return f"{int(digits[:2])}.{digits[2]}"
    return None


def wheel_tag_info(version: str) -> Optional[Dict[str, Any]]:
    """What the local version tag of a torch wheel says about its build.

    '1.11.0+cu113' -> {'cuda': '11.3', 'tag': '+cu113'}; '2.1.0+cpu' -> {'cuda': None, 'tag': '+cpu'};
    '2.1.0+rocm5.6' -> {'cuda': None, 'hip': '5.6', 'tag': '+rocm5.6'}; no tag -> None.
    """
    if not version or "+" not in version:
        return None
    m = _CU_TAG.search(version)
    if m:
        cuda = cuda_from_cu_digits(m.group(1))
        if cuda:
            return {"cuda": cuda, "tag": m.group(0)}
    m = _ROCM_TAG.search(version)
    if m:
        return {"cuda": None, "hip": m.group(1), "tag": m.group(0)}
    m = _CPU_TAG.search(version)
    if m:
        return {"cuda": None, "tag": "+cpu"}
    return None


def to_int(value: Optional[str]) -> Optional[int]:
    if value is None:
        return None
    s = value.strip()
    if s.isdigit() and len(s) < 19:
        return int(s)
    return None


def yes_no(value: Optional[str]) -> Optional[bool]:
    """'Yes'/'Enabled'/'True'/'On' -> True, 'No'/'Disabled'/'False'/'Off' -> False, anything else -> None."""
    if value is None:
        return None
    s = value.strip().lower()
    if s in ("yes", "enabled", "true", "on", "active"):
        return True
    if s in ("no", "disabled", "false", "off", "inactive"):
        return False
    return None


def is_not_collected(value: Optional[str]) -> bool:
    return value is None or value.strip().lower() in NOT_COLLECTED


def raw_lines(lines: Any) -> List[Tuple[Optional[int], str]]:
    """Each line of the text as pasted (cleaned of colours and CR, not of prompts: a `# …` comment line that the
    line parsers see as a root prompt is kept), with its index in `lines.lines` for citing (None when joined)."""
    index = {no - 1: idx for idx, no in enumerate(lines.nos)}
    return [(index.get(ahead), line) for ahead, line in enumerate(lines.text.split("\n"))]


class Builder:
    """Collects the facts one parser finds, with evidence. The first value for a path wins; a different
    later value for the same path is kept as a conflict instead of overwriting."""

    def __init__(self, name: str, lines: Any, kind: str):
        self.name = name
        self.lines = lines
        self.kind = kind
        self.facts: Dict[str, Any] = {}
        self.evidence: Dict[str, str] = {}
        self.conflicts: List[Dict[str, Any]] = []
        self.warnings: List[str] = []
        self.first_index: Optional[int] = None

    # -- evidence -------------------------------------------------------------------------------
    def cite(self, idx: Optional[int], note: Optional[str] = None) -> str:
        if idx is None or idx < 0 or idx >= len(self.lines.lines):
            text = ""
            where = self.name
        else:
            text = self.lines.lines[idx].strip()
            where = f"{self.name} line {self.lines.nos[idx]}"
        if len(text) > MAX_EVIDENCE_CHARS:
            text = text[:MAX_EVIDENCE_CHARS] + "..."
        out = f"{where}: '{text}'" if text else where
        if note:
            out += f" ({note})"
        return out

    def touch(self, idx: Optional[int]) -> None:
        if idx is not None and (self.first_index is None or idx < self.first_index):
            self.first_index = idx

    # -- facts ----------------------------------------------------------------------------------
    def has(self, path: str) -> bool:
        node: Any = self.facts
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.facts
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    def set(self, path: str, value: Any, idx: Optional[int] = None, note: Optional[str] = None,
            evidence: Optional[str] = None) -> bool:
        """Set a fact unless already known. Returns True when the value was stored."""
        parts = path.split(".")
        node = self.facts
        for part in parts[:-1]:
            nxt = node.get(part)
            if not isinstance(nxt, dict):
                nxt = {}
                node[part] = nxt
            node = nxt
        key = parts[-1]
        self.touch(idx)
        if key in node:
            if node[key] != value:
                self._conflict(path, node[key], value)
            return False
        node[key] = value
        if evidence is None and idx is not None:
            evidence = self.cite(idx, note)
        if evidence:
            self.evidence.setdefault(path, evidence)
        return True

    def _conflict(self, path: str, old: Any, new: Any) -> None:
        for c in self.conflicts:
            if c["fact"] == path:
                if new not in c["values"]:
                    c["values"].append(copy.deepcopy(new))
                    c["sources"].append(self.name)
                return
        self.conflicts.append({"fact": path, "values": [copy.deepcopy(old), copy.deepcopy(new)],
                               "sources": [self.name, self.name]})

    def empty(self) -> bool:
        return not self.facts


def cut_short(builder: Builder, idx: Optional[int]) -> None:
    """A report cut short states neither how many GPUs there are nor the health of the GPU it stops in."""
    builder.set("nvml.gpus_counted", False, idx, "the report is cut short")
    builder.set("nvml.health_read", False, idx, "the report is cut short")
