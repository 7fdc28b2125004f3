"""`--format sarif`: the report as SARIF 2.1.0, the format GitHub code scanning and other review tools read.

Each finding is a result: its rule's catalog entry (summary, what it checks, how to fix it) under
`tool.driver.rules`, its level from the severity, its place in the job file as a region, and a fingerprint that
stays the same when lines move (the rule, the file and the message without line numbers)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path, PurePosixPath
from typing import IO, Any, Dict, List, Optional

from gpudoctor.catalog import find_rule
from gpudoctor.model import Finding, Report, Severity
from gpudoctor.version import __version__

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SOURCE_ROOT = "%SRCROOT%"  # relative paths are relative to where gpudoctor ran (the repository's root in CI)
_LINE_NUMBERS = re.compile(r"\b(lines?|at) \d+\b|:\d+\b")


def artifact_location(path: str) -> dict:
    """A path as SARIF names it: relative to the working directory where it lies under it (code scanning resolves
    those against the repository), else an absolute file URI."""
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": PurePosixPath(*relative.parts).as_posix(), "uriBaseId": SOURCE_ROOT}


def _place(finding: Finding, report: Report) -> Optional[dict]:
    """Where a finding points: its location, else the file its evidence names, else the one file linted (code
    scanning refuses a result without a location); None where no file is known (a finding about the machine)."""
    if finding.location:
        region = {"startLine": max(finding.location.line or 1, 1)}
        if finding.location.column:
            region["startColumn"] = max(finding.location.column, 1)
        physical = {"artifactLocation": artifact_location(finding.location.path)}
        if finding.location.line:
            physical["region"] = region
        return {"physicalLocation": physical}
    path = finding.evidence.get("path") if isinstance(finding.evidence.get("path"), str) else None
    paths = [p for p in report.source.get("paths", ()) if isinstance(p, str)]
    if path is None and len(paths) == 1:
        path = paths[0]
    return {"physicalLocation": {"artifactLocation": artifact_location(path)}} if path else None


def fingerprint(finding: Finding, uri: str) -> str:
    """The same finding in the same file keeps its fingerprint when lines are added above it."""
    words = _LINE_NUMBERS.sub("", finding.message)
    return hashlib.sha256(f"{finding.rule}\0{uri}\0{words}".encode()).hexdigest()[:32]


def rule_descriptor(rule_id: str, finding: Finding) -> dict:
    """A rule's metadata from the catalog (a site policy's rule: from its finding)."""
    rule = find_rule(rule_id)
    if rule is None:
        return {"id": rule_id, "name": finding.name, "shortDescription": {"text": finding.name},
                "defaultConfiguration": {"level": LEVELS[finding.severity]}}
    docs = rule.docs
    help_text = "\n\n".join(part for part in (docs.get("why", ""), docs.get("fix", ""),
                                                f"gpudoctor explain {rule.id}") if part)
    descriptor: Dict[str, Any] = {
        "id": rule.id, "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": docs.get("what") or rule.summary},
        "help": {"text": help_text},
        "defaultConfiguration": {"level": LEVELS[rule.severity]},
        "properties": {"tags": [rule.family], "fix_applicability": rule.fix_applicability},
    }
    references = [ref for ref in docs.get("references", ()) if isinstance(ref, str)]
    if references:
        descriptor["properties"]["references"] = references
    return descriptor


def to_sarif(report: Report) -> dict:
    rules: Dict[str, int] = {}
    descriptors: List[dict] = []
    results: List[dict] = []
    seen: Dict[str, int] = {}
    for finding in report.findings:
        if finding.rule not in rules:
            rules[finding.rule] = len(descriptors)
            descriptors.append(rule_descriptor(finding.rule, finding))
        result = {"ruleId": finding.rule, "ruleIndex": rules[finding.rule], "level": LEVELS[finding.severity],
                  "message": {"text": finding.message + (f"\nFix: {finding.fix.summary}" if finding.fix else "")}}
        place = _place(finding, report)
        if place:
            result["locations"] = [place]
            uri = place["physicalLocation"]["artifactLocation"]["uri"]
            key = fingerprint(finding, uri)
            seen[key] = seen.get(key, 0) + 1  # the same words twice in one file: told apart by their order
            result["partialFingerprints"] = {"gpudoctor/v1": f"{key}:{seen[key]}"}
        results.append(result)
    run = {
        "tool": {"driver": {"name": "gpudoctor", "version": __version__, "semanticVersion": __version__,
                            "rules": descriptors}},
        "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path.cwd().as_uri() + "/"}},
        "results": results,
        "invocations": [{"executionSuccessful": True}],
    }
    return {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}


def render(report: Report, stream: IO, quiet: bool = False) -> None:
    json.dump(to_sarif(report), stream, indent=2, ensure_ascii=False)
    stream.write("\n")
