"""Turn one pasted text into snapshot facts, and merge several.

    report = parse_report(text, name="issue-1234.txt")    # auto-detects; ReportError if nothing recognisable
    facts, evidence, conflicts = merge_reports([report, other])

The formats are those of gpudoctor.ingest.registry (collect_env, ds_report, nvidia-smi, nvcc, pip, nccl-tests …).
A text may hold several of them; each part is parsed and the parts merge. Pure functions: no I/O, no imports of
torch.

Known vs unknown: a key that is absent is unknown; ``None`` means known to be absent (``torch.cuda: None`` is a
CPU-only build). A value that the text only implies (a ``+cu113`` wheel tag, torch's 'found version 11040') is used
and its evidence says so.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from gpudoctor.errors import InputError
from gpudoctor.schema import notable_facts

from ._common import Builder, wheel_tag_info
from .detect import detect
from .normalize import Lines, normalize
from .registry import BY_KIND, in_words

__all__ = ["ParsedReport", "ReportError", "NothingRecognised", "parse_report", "merge_reports", "missing_facts",
           "NOTABLE_FACTS"]

# Facts most rules need (the schema's `notable` keys); a report that lacks them says so in `missing`.
NOTABLE_FACTS = notable_facts()


class ReportError(InputError, ValueError):
    """A text gpudoctor cannot read (empty, binary, a report whose parts all failed to parse)."""


class NothingRecognised(ReportError):
    """A readable text in which nothing is recognised: `check --from` reports that in one line, not as an error."""


@dataclass(frozen=True)
class ParsedReport:
    kind: str          # a format's kind (gpudoctor.ingest.registry); "mixed" when the text holds several
    facts: dict        # partial snapshot facts: {"torch": {...}, "nvml": {...}, "nvcc": {...}, "host": {...}}
    evidence: dict     # fact path -> "name line 14: 'Nvidia driver version: 418.67'"
    missing: list      # NOTABLE_FACTS the text did not carry
    name: str = "<stdin>"
    parts: tuple = ()  # kinds of the parts found, in order of appearance
    conflicts: list = field(default_factory=list)  # differing values inside this one text (first kept)
    warnings: list = field(default_factory=list)   # a cut table, a refused XML, a part that failed to parse
    lines: int = 0     # lines in the text (set where nothing in it was recognised)


def parse_report(text: Any, name: str = "<stdin>") -> ParsedReport:
    """Parse one pasted text. Raises ReportError only when nothing in it could be recognised."""
    lines = normalize(text)
    if not any(line.strip() for line in lines.lines):
        raise ReportError(f"{name}: the report is empty")
    kinds = detect(lines)
    parts, warnings = _parse_parts(lines, kinds, name)
    if not parts:
        raise _nothing(name, kinds, warnings)
    hints = [p for p in parts if BY_KIND[p.kind].hint]
    main = [p for p in parts if not BY_KIND[p.kind].hint]
    main.sort(key=lambda p: p.first_index if p.first_index is not None else 0)
    ordered = main + hints
    facts: Dict[str, Any] = {}
    evidence: Dict[str, str] = {}
    conflicts: List[Dict[str, Any]] = []
    origin: Dict[str, str] = {}
    for p in ordered:
        conflicts.extend(p.conflicts)
        src = f"{name} ({p.kind})" if len(ordered) > 1 else name
        _merge(facts, p.facts, "", src, origin, conflicts, evidence, p.evidence)

    _infer_from_wheel_tag(facts, evidence)

    kinds_found = tuple(dict.fromkeys(p.kind for p in main)) or ("torch_warning",)
    kind = kinds_found[0] if len(kinds_found) == 1 else "mixed"
    return ParsedReport(kind=kind, facts=facts, evidence=evidence, missing=missing_facts(facts), name=name,
                        parts=kinds_found, conflicts=conflicts, warnings=warnings)


def _parse_parts(lines: Lines, kinds: Sequence[str], name: str) -> Tuple[List[Builder], List[str]]:
    """Each part of the text read by its format's parser: (the parts that gave facts, the warnings)."""
    parts: List[Builder] = []
    warnings: List[str] = []
    for kind in kinds:
        try:
            builder = BY_KIND[kind].parser()(lines, name)
        except Exception as exc:  # a parser bug must not hide what the other parts say
            warnings.append(f"{name}: the {kind} part could not be parsed ({type(exc).__name__}: {exc})")
            continue
        warnings.extend(builder.warnings)
        if not builder.empty():
            parts.append(builder)
    return parts, warnings


def _nothing(name: str, kinds: Sequence[str], warnings: List[str]) -> ReportError:
    """Why no part of the text gave a fact: a part's warning, or nothing recognised in it."""
    if warnings:
        return ReportError(warnings[0])
    if kinds:
        shown = " + ".join(k.replace("_", " ") for k in kinds)
        return NothingRecognised(f"{name}: looks like {shown} output but carries no facts gpudoctor reads (cut too "
                                 "early?)")
    return NothingRecognised(f"{name}: not a report gpudoctor reads ({in_words()})")


def _infer_from_wheel_tag(facts: Dict[str, Any], evidence: Dict[str, str]) -> None:
    """torch.cuda from a '+cu113' / '+cpu' / '+rocm5.6' tag when no line states the CUDA build."""
    torch = facts.get("torch")
    if not isinstance(torch, dict) or not isinstance(torch.get("version"), str):
        return
    info = wheel_tag_info(torch["version"])
    if info is None:
        return
    base = evidence.get("torch.version", f"torch version {torch['version']}")
    note = f" (inferred from wheel tag {info['tag']})"
    if "cuda" not in torch:
        torch["cuda"] = info["cuda"]
        evidence["torch.cuda"] = base + note
    if "hip" in info and "hip" not in torch:
        torch["hip"] = info["hip"]
        evidence["torch.hip"] = base + note


def missing_facts(facts: Dict[str, Any]) -> List[str]:
    out = []
    for path in NOTABLE_FACTS:
        node: Any = facts
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                out.append(path)
                break
    return out


def merge_reports(reports: List[ParsedReport]) -> Tuple[dict, dict, list]:
    """Merge several parsed reports into one facts object. The first value of a fact is kept; a different
    value from a later report is recorded as a conflict, never silently overwritten. GPUs merge by index (a
    name nvidia-smi truncated with '...' is completed by the full name from another report)."""
    facts: Dict[str, Any] = {}
    evidence: Dict[str, str] = {}
    conflicts: List[Dict[str, Any]] = []
    origin: Dict[str, str] = {}
    for r in reports:
        for c in r.conflicts:
            conflicts.append(copy.deepcopy(c))
        _merge(facts, r.facts, "", r.name, origin, conflicts, evidence, r.evidence)
    return facts, evidence, conflicts


# ------------------------------------------------------------------------------------------------
# merging
# ------------------------------------------------------------------------------------------------
def _origin_of(origin: Dict[str, str], path: str) -> str:
    p = path
    while p:
        if p in origin:
            return origin[p]
        cut = max(p.rfind("."), p.rfind("["))
        if cut <= 0:
            break
        p = p[:cut]
    return "?"


def _conflict(conflicts: List[Dict[str, Any]], path: str, old: Any, new: Any, old_src: str, new_src: str) -> None:
    for c in conflicts:
        if c["fact"] == path:
            if new not in c["values"]:
                c["values"].append(copy.deepcopy(new))
                c["sources"].append(new_src)
            return
    conflicts.append({"fact": path, "values": [copy.deepcopy(old), copy.deepcopy(new)],
                      "sources": [old_src, new_src]})


def _merge(dst: Dict[str, Any], src: Dict[str, Any], prefix: str, name: str, origin: Dict[str, str],
           conflicts: List[Dict[str, Any]], evidence: Dict[str, str], src_evidence: Dict[str, str]) -> None:
    for key, value in src.items():
        path = prefix + key
        if key not in dst:
            dst[key] = copy.deepcopy(value)
            origin[path] = name
            for ek, ev in src_evidence.items():
                if (ek == path or ek.startswith(path + ".")) and ek not in evidence:
                    evidence[ek] = ev
            continue
        old = dst[key]
        if isinstance(old, dict) and isinstance(value, dict):
            _merge(old, value, path + ".", name, origin, conflicts, evidence, src_evidence)
        elif key in ("gpus", "devices") and isinstance(old, list) and isinstance(value, list):
            _merge_gpus(old, value, path, name, origin, conflicts, evidence, src_evidence)
        elif key == "warnings" and isinstance(old, list) and isinstance(value, list):
            for w in value:
                if w not in old:
                    old.append(w)
        elif old != value:
            _conflict(conflicts, path, old, value, _origin_of(origin, path), name)


def _names_agree(a: Any, builder: Any) -> Optional[str]:
    """The better of two GPU names when one is the other truncated by nvidia-smi ('Tesla V100-PCIE...')."""
    if not isinstance(a, str) or not isinstance(builder, str):
        return None
    if a == builder:
        return a
    for short, full in ((a, builder), (builder, a)):
        if short.endswith("...") and full.startswith(short[:-3].rstrip()) and not full.endswith("..."):
            return full
    return None


def _merge_gpus(old: List[Any], new: List[Any], path: str, name: str, origin: Dict[str, str],
                conflicts: List[Dict[str, Any]], evidence: Dict[str, str], src_evidence: Dict[str, str]) -> None:
    if (not old) != (not new):
        _conflict(conflicts, path, old, new, _origin_of(origin, path), name)
        return
    def key_of(g: Any, pos: int) -> Any:
        if isinstance(g, dict) and isinstance(g.get("index"), int):
            return g["index"]
        return ("pos", pos)
    by_key = {key_of(g, i): g for i, g in enumerate(old)}
    for pos, g in enumerate(new):
        k = key_of(g, pos)
        gpath = f"{path}[{k if isinstance(k, int) else pos}]"
        if k not in by_key:
            old.append(copy.deepcopy(g))
            by_key[k] = old[-1]
            origin[gpath] = name
            continue
        cur = by_key[k]
        if not isinstance(cur, dict) or not isinstance(g, dict):
            if cur != g:
                _conflict(conflicts, gpath, cur, g, _origin_of(origin, gpath), name)
            continue
        for fk, fv in g.items():
            fpath = gpath + "." + fk
            if fk not in cur:
                cur[fk] = copy.deepcopy(fv)
                origin[fpath] = name
                continue
            if fk == "name":
                better = _names_agree(cur[fk], fv)
                if better is not None:
                    if better != cur[fk]:
                        cur[fk] = better
                        origin[fpath] = name
                    continue
            if cur[fk] != fv:
                _conflict(conflicts, fpath, cur[fk], fv, _origin_of(origin, fpath), name)
    if all(isinstance(g, dict) and isinstance(g.get("index"), int) for g in old):
        old.sort(key=lambda g: g["index"])
