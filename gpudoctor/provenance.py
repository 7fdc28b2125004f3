"""Where a fact came from. A snapshot's `origins` map a fact path (a group such as `nvml`, or a deeper path such as
`torch.arch_list`) to one of the origins below; a path no entry covers came from the snapshot's base (its
source's kind). gpudoctor.verdict reads them: what a pasted report or a log leaves out is not known to be absent.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping

PROBE = "probe"  # this machine's live probes
SNAPSHOT = "snapshot"  # a recorded snapshot (`gpudoctor snapshot -o FILE`)
REPORT = "report"  # a pasted report: collect_env, nvidia-smi, ds_report, pip list …
LOG = "log"  # a log's lines (ingest/logs.py), and the facts an atlas message states
FILES = "files"  # job files: scripts, job scripts, env files, manifests, DeepSpeed configs
COMMAND_LINE = "command line"  # what the user typed: `--model 7B`, training settings

ORIGINS = (PROBE, SNAPSHOT, REPORT, LOG, FILES, COMMAND_LINE)
# Sources that show part of a machine: a fact they leave out is not known to be absent, and a verdict that rests
# on none of their facts rests on nothing.
PARTIAL = frozenset({REPORT, LOG})
BASES = {"live": PROBE, "snapshot": SNAPSHOT, "report": REPORT, "files": FILES}


def base_origin(source: Mapping[str, Any]) -> str:
    """Where a snapshot's facts came from where its `origins` say nothing: its source's kind; for a recorded
    snapshot, the kind it was recorded from (a machine's probes: the recorded snapshot; a paste: the paste)."""
    kind = str(source.get("kind", "live"))
    if kind == "snapshot":
        recorded = str(source.get("recorded", "live"))
        return SNAPSHOT if recorded in ("live", "snapshot") else BASES.get(recorded, SNAPSHOT)
    return BASES.get(kind, PROBE)


def origin_of(origins: Mapping[str, str], path: str, base: str) -> str:
    """The origin of the deepest path in `origins` that is `path` or one of its parents; `base` when none is."""
    while path:
        if path in origins:
            return origins[path]
        path = path.rpartition(".")[0]
    return base


def fingerprint(facts: Mapping[str, Any]) -> Dict[str, str]:
    """A comparable text of each fact group, to tell which groups a reader changed (`changed`)."""
    return {group: repr(value) for group, value in facts.items()}


def changed(before: Mapping[str, str], facts: Mapping[str, Any]) -> Iterable[str]:
    """The groups of `facts` added or changed since `before` (a `fingerprint`)."""
    after = fingerprint(facts)
    return [group for group, text in after.items() if before.get(group) != text]
