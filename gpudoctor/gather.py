"""Gathering: one typed request in, one Snapshot out. Every command (and the library) gathers facts here.

The facts come from one base — this machine's live probes, a recorded snapshot, or pasted reports — and then the
files the request names are read on top: training scripts, a DeepSpeed config, env files, a model description.
Input that cannot be used raises gpudoctor.errors.InputError (the CLI's exit 2).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from gpudoctor.errors import InputError
from gpudoctor.provenance import COMMAND_LINE, FILES, changed, fingerprint
from gpudoctor.snapshot import Snapshot

MAX_TIMEOUT = 86400.0  # seconds per probe: a day


@dataclass(frozen=True)
class Request:
    """What to gather. The base is a recorded snapshot, pasted reports, or job files alone (`files`: nothing is
    probed); without any of them, this machine is probed for `groups` (None: every group the rule catalog reads)."""

    snapshot: Optional[str] = None  # a recorded snapshot file (`gpudoctor snapshot -o FILE`)
    reports: Sequence[str] = ()  # pasted reports and logs (gpudoctor.ingest.registry; '-': stdin)
    files: Sequence[str] = ()  # job files (lint): read by every reader that knows them; nothing is probed
    texts: Mapping[str, str] = field(default_factory=dict)  # job files given as text: a name among `files` → its text
    skip_unknown: bool = False  # a named file no reader knows is skipped, as in a folder (pre-commit hands any)
    groups: Optional[FrozenSet[str]] = None  # the fact groups the live probes gather
    python: str = sys.executable  # the job's interpreter, whose torch/deepspeed the probes inspect
    timeout: float = 15.0  # seconds per probe
    quick: bool = False  # read torch's versions from its files instead of importing it
    environ: Optional[Mapping[str, str]] = None  # the environment the probes see (None: this process's)
    scripts: Sequence[str] = ()  # training scripts, analysed statically (never run)
    ds_config: Optional[str] = None  # a DeepSpeed config (JSON)
    env_files: Sequence[str] = ()  # .env, shell/sbatch, Dockerfile, Kubernetes manifest: overlaid on the env
    model: Optional[str] = None  # a model size (7B) or a Hugging Face config.json, for the memory estimate
    training: Mapping[str, Any] = field(default_factory=dict)  # training settings for the estimate (None: unset)


def gather(request: Request, meanwhile: Optional[Callable[[], None]] = None) -> Snapshot:
    """The snapshot the request describes: the base facts, then every file the request names read on top.
    `meanwhile`: the caller's own work, done once while this machine's probes run (else before the files are read)."""
    if request.files and (request.snapshot or request.reports):
        raise InputError("job files alone (Request.files, as `lint` reads them) take no snapshot or reports")
    _named_files_exist(request)
    if request.files:
        snapshot = files_snapshot(request.files, request.texts, request.skip_unknown)
    elif request.snapshot:
        from gpudoctor.snapshot import load

        snapshot = load(request.snapshot)
        if request.reports:  # a recorded node plus its run's logs (or reports)
            from gpudoctor.ingest.source import overlay_reports

            overlay_reports(snapshot, list(request.reports))
    elif request.reports:
        snapshot = reports_snapshot(request.reports)
    else:
        snapshot = live_snapshot(request, meanwhile)
        meanwhile = None
    if meanwhile:
        meanwhile()
    for overlay, origin in OVERLAYS:
        before = fingerprint(snapshot.facts)
        overlay(request, snapshot)
        snapshot.origins.update((group, origin) for group in changed(before, snapshot.facts))
    return snapshot


def _named_files_exist(request: Request) -> None:
    """A script, DeepSpeed config or env file the request names that is not there is an InputError before the base
    is gathered: a mistyped name is said at once, not after seconds of probing."""
    from gpudoctor.files import read_input

    named = [(name, "script") for name in request.scripts] + [(name, "env file") for name in request.env_files]
    for name, what in named + ([(request.ds_config, "DeepSpeed config")] if request.ds_config else []):
        if not Path(name).is_file():
            read_input(name, what)  # its one-line error


def catalog_groups() -> FrozenSet[str]:
    """Every fact group the rule catalog reads, plus `host` (the report's header)."""
    from gpudoctor.catalog import load_catalog

    return groups_for(load_catalog())


def groups_for(rules) -> FrozenSet[str]:
    """The fact groups the live probes must gather for these rules, plus `host` (the report's header)."""
    from gpudoctor.catalog import needed_groups

    return frozenset(needed_groups(rules) | {"host"})


def live_snapshot(request: Request, meanwhile: Optional[Callable[[], None]] = None) -> Snapshot:
    """This machine, probed for the request's fact groups (each probe bounded by the request's timeout); the caller's
    `meanwhile` done while the probes run."""
    from gpudoctor.probes import ProbeContext, probes_for, run_probes

    if not 0 < request.timeout <= MAX_TIMEOUT:  # also false for nan
        raise InputError(f"--timeout must be positive and at most {MAX_TIMEOUT:g} seconds")
    if os.sep in request.python and not os.path.exists(request.python):
        raise InputError(f"--python {request.python!r}: no such file")
    environ = dict(os.environ if request.environ is None else request.environ)
    ctx = ProbeContext(python=request.python, timeout=request.timeout, environ=environ, quick=request.quick)
    groups = catalog_groups() if request.groups is None else request.groups
    facts, results = run_probes(probes_for(groups), ctx, meanwhile)
    return Snapshot(facts=facts, probes=results, source={"kind": "live", "paths": []})


def reports_snapshot(paths: Sequence[str]) -> Snapshot:
    """The facts the pasted reports carry (gpudoctor.ingest); InputError when none is readable."""
    from gpudoctor.ingest.source import snapshot_from_reports

    return snapshot_from_reports(list(paths))


def files_snapshot(names: Sequence[str], texts: Mapping[str, str] = {}, skip_unknown: bool = False) -> Snapshot:  # noqa: B006
    """Job files alone (env files, job scripts, manifests, Dockerfiles, training scripts, DeepSpeed configs); a
    folder is read recursively, skipping the files no reader knows (`skip_unknown`: named files too); a name in
    `texts` is read from there (standard input, an assistant's text), never from the disk."""
    from gpudoctor.readers.registry import read_files

    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": list(names)})
    read_files(names, snapshot, texts, skip_unknown)
    return snapshot


def job_snapshots(names: Sequence[str], texts: Mapping[str, str] = {},  # noqa: B006 - never mutated
                  skip_unknown: bool = False) -> List[Snapshot]:
    """Job files alone as `files_snapshot` reads them, one snapshot per job they make (a launch file and what it
    starts, sources and passes: readers/reach.py), so that files which do not reach each other are judged apart; the
    first also carries the folders with nothing to read and the walks cut short."""
    from gpudoctor.readers.registry import add_named, job_files, read_named

    named = read_named(names, texts, skip_unknown)
    snapshots = []
    for number, files in enumerate(job_files(named) or [[]]):
        snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": list(names)})  # as the user named
        add_named(snapshot, named, files, inputs=number == 0)
        snapshots.append(snapshot)
    return snapshots


def _read(name: str, snapshot: Snapshot, part: Optional[str], what: str, as_format: Optional[str] = None) -> None:
    """Add one file's facts (or only `part` of them) as its format's reader gives them (`as_format`: that format's,
    whatever the file looks like); InputError when it cannot be read."""
    from gpudoctor.files import read_input
    from gpudoctor.readers.registry import read_file

    read_file(Path(name), snapshot, part=part, text=read_input(name, what), as_format=as_format)


def _scripts(request: Request, snapshot: Snapshot) -> None:
    """Training scripts: their facts (process starts, precision requests …) join the machine's."""
    for name in request.scripts:
        _read(name, snapshot, "script", "script")


def _ds_config(request: Request, snapshot: Snapshot) -> None:
    """A DeepSpeed config's facts (GD3xx, and its bf16/fp16 for GD201) join the machine's: read as one whatever it
    looks like (a malformed config is a GD307 finding)."""
    if request.ds_config:
        _read(request.ds_config, snapshot, "ds_config", "DeepSpeed config", as_format="ds_config")


def _env_files(request: Request, snapshot: Snapshot) -> None:
    """The environment as the job will see it: the snapshot's variables overlaid with those the files set."""
    if request.env_files:
        from gpudoctor.readers.registry import read_env_files

        read_env_files(list(request.env_files), snapshot)


def _model(request: Request, snapshot: Snapshot) -> None:
    """The model and the training settings join the facts (the memory rules GD501, GD504 read them)."""
    if request.model:
        from gpudoctor.estimate import load_model, model_fact

        snapshot.facts["model"] = model_fact(load_model(request.model), request.training)


# The readers of the files a request names, in the order they apply, and where what they add comes from.
OVERLAYS: List[Tuple[Callable[[Request, Snapshot], None], str]] = [
    (_scripts, FILES), (_ds_config, FILES), (_env_files, FILES), (_model, COMMAND_LINE)]
