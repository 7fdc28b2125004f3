"""gpudoctor as a library: gather facts, evaluate the rules, format the report — no command line involved.

    import gpudoctor
    snapshot = gpudoctor.collect(gpudoctor.Request(files=["job.sbatch"]))
    report = gpudoctor.evaluate(snapshot)
    print(gpudoctor.format_report(report, "plain"))
"""

from __future__ import annotations

import io
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from gpudoctor.gather import Request, gather
from gpudoctor.model import Report
from gpudoctor.snapshot import Snapshot

__all__ = ["Request", "collect", "collect_pasted", "describe_rule", "estimate_memory", "evaluate", "evaluate_fleet",
           "format_report", "lint", "message_atlas", "pasted_snapshots", "preview_fix", "rule_catalog"]

SNAPSHOT_MARK = '"gpudoctor.snapshot/'  # a snapshot document names its schema first (gpudoctor.snapshot.SCHEMA)


def collect(request: Request) -> Snapshot:
    """The facts the request describes (this machine, a recorded snapshot, pasted reports, job files …);
    raises gpudoctor.errors.InputError for input it cannot use."""
    return gather(request)


def collect_pasted(text: str, paths: Sequence[str] = ()) -> Snapshot:
    """The facts of pasted report or log text (and of report or log files), read as `check --from FILE... -` reads
    them: the text is the `<stdin>` part (none: the files alone); raises gpudoctor.errors.InputError when nothing in
    them is recognised."""
    from gpudoctor.errors import InputError
    from gpudoctor.ingest.source import snapshot_from_reports

    if not text and not paths:
        raise InputError("nothing to read: give the pasted text or report files")
    return snapshot_from_reports([*paths, "-"] if text else list(paths),
                                 io.BytesIO(text.encode("utf-8", errors="replace")))


def _is_snapshot(head: str) -> bool:
    head = head.lstrip()
    return head.startswith("{") and SNAPSHOT_MARK in head[:4096]


def pasted_snapshots(text: str, paths: Sequence[str]) -> Tuple[List[Tuple[str, Snapshot]], str, List[str]]:
    """The `gpudoctor snapshot` documents among pasted text and files, each loaded as `check --snapshot` loads it,
    by name; and what is left to read as reports and logs (the text, or "" where it was a snapshot; the paths)."""
    from gpudoctor.snapshot import load, loads

    found, rest = [], []
    if text and _is_snapshot(text[:8192]):
        found.append(("<stdin>", loads(text, "<stdin>")))
        text = ""
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                head = handle.read(8192)
        except OSError:
            head = ""  # said by the reader that reads it as a report
        if _is_snapshot(head):
            found.append((path, load(path)))
        else:
            rest.append(path)
    return found, text, rest


def overlay_pasted(snapshot: Snapshot, text: str, paths: Sequence[str]) -> Snapshot:
    """A recorded machine with what pasted logs and reports add, as `check --snapshot FILE --from LOG` reads them."""
    from gpudoctor.ingest.source import overlay_reports

    if text or paths:
        overlay_reports(snapshot, [*paths, "-"] if text else list(paths), io.BytesIO(text.encode("utf-8", "replace")))
    return snapshot


def evaluate_fleet(nodes: Sequence[Tuple[str, Snapshot]], select: Sequence[str] = ()) -> dict:
    """The `gpudoctor fleet SNAPSHOT... --format json` document (`gpudoctor.fleet/1`) of named snapshots."""
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.fleet import evaluate_fleet as judge
    from gpudoctor.fleet import fleet_nodes
    from gpudoctor.render.fleet import to_json

    names, snapshots = [name for name, _ in nodes], [snapshot for _, snapshot in nodes]
    return to_json(judge(fleet_nodes(snapshots, names), rules_for_run(select, (), (), True)))


def evaluate(snapshot: Snapshot, rules: Optional[Sequence] = None, select: Sequence[str] = (),
             ignore: Sequence[str] = ()) -> Report:
    """The report of the rules on the snapshot: `rules` (default: the catalog, narrowed by `select`/`ignore`
    ID prefixes; the machine rules are left out for job files alone, as `gpudoctor lint` does)."""
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.engine import evaluate as run_rules

    if rules is None:
        rules = rules_for_run(select, ignore, host=snapshot.source.get("kind") != "files")
    return run_rules(snapshot, rules)


def lint(paths: Sequence[str], rules: Optional[Sequence] = None, select: Sequence[str] = (), ignore: Sequence[str] = (),
         known_ids: Sequence[str] = (), texts: Mapping[str, str] = {},  # noqa: B006 - never mutated
         skip_unknown: bool = False) -> Report:
    """The report of job files and folders alone, as `gpudoctor lint PATH...` gives it: the files grouped into the
    jobs they make (a launch file and what it starts, sources and passes), each job judged apart, the reports joined
    (a rule found in any job is found, else unknown in any is unknown). `rules`, `select`, `ignore` as `evaluate`;
    `known_ids`: rule IDs known beyond them (a site policy's); `texts` and `skip_unknown` as Request's. InputError
    for a named file that cannot be read."""
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.engine import evaluate as run_rules
    from gpudoctor.gather import job_snapshots
    from gpudoctor.joined import joined

    if rules is None:
        rules = rules_for_run(select, ignore, host=False)
    return joined([run_rules(snapshot, rules, known_ids=known_ids)
                   for snapshot in job_snapshots(paths, texts, skip_unknown)])


def format_report(report: Report, fmt: str = "plain", quiet: bool = False) -> str:
    """The report as text in a format of gpudoctor.render.FORMATS (rich is for terminals: plain without colour);
    ValueError for a format that is not one of them."""
    from gpudoctor.render import BY_NAME, render_report

    if fmt not in BY_NAME:
        raise ValueError(f"no output format {fmt!r}: {', '.join(BY_NAME)}")
    stream = io.StringIO()
    render_report(report, "plain" if fmt == "rich" else fmt, stream, quiet=quiet)
    return stream.getvalue()


def estimate_memory(model: str, training: Optional[Mapping[str, Any]] = None, ds_config: Optional[str] = None,
                    gpu: Optional[str] = None) -> dict:
    """The `gpudoctor estimate --format json` document (`gpudoctor.estimate/1`): training memory per GPU for `model`
    (a size such as 7B or a config.json) with the training settings (gpudoctor.estimate's names: micro_batch,
    seq_len, precision, zero_stage, world_size …; None or absent: the DeepSpeed config's, else the defaults),
    compared with `gpu` (default: this machine's GPUs)."""
    from gpudoctor.fit import fit

    est, gpus = fit(model, dict(training or {}), ds_config, gpu)
    return est.to_json(gpus)


def rule_catalog() -> dict:
    """The `gpudoctor rules --format json` document (`gpudoctor.rules/1`): every rule's ID, name, severity, summary."""
    from gpudoctor.catalog import catalog_json, load_catalog

    return catalog_json(load_catalog())


def describe_rule(rule_id: str) -> dict:
    """The `gpudoctor explain ID --format json` document: one rule's documentation, fix cases and examples."""
    from gpudoctor.catalog import find_rule, quoted_id, rule_json
    from gpudoctor.errors import InputError

    rule = find_rule(rule_id)
    if rule is None:
        raise InputError(f"no rule {quoted_id(rule_id)} (see `gpudoctor rules`)")
    return rule_json(rule, full=True)


def message_atlas() -> dict:
    """The messages gpudoctor reads in a paste or log (`gpudoctor.messages/1`, the data of docs/messages.md): for
    each, who prints it and where, the literal it is found by and its pattern, what it proves, the facts it states,
    the rule it feeds, and real samples with their public source."""
    from gpudoctor.ingest.atlas import messages

    return {"schema": "gpudoctor.messages/1", "messages": [
        {"id": m.id, "project": m.project, "where": m.where, "trigger": m.trigger, "pattern": m.pattern.pattern,
         "event": m.event, "proves": m.proves, "rule": m.rule, "severity": m.severity, "facts": dict(m.facts),
         "samples": [{"text": sample.text, "source": sample.source} for sample in m.samples]}
        for m in messages()]}


def preview_fix(report: Report, env_file: str, unsafe: bool = False) -> dict:
    """What `gpudoctor fix --write-env ENV_FILE --dry-run` would change in the file, written nowhere
    (`gpudoctor.fix.preview/1`): the diff, the conflicts left as they are, what is left by hand. Gather the report
    with the file among `Request.env_files`, so its own lines are judged."""
    from gpudoctor.fix import plan_fixes
    from gpudoctor.fix.envfile import write_env

    plan = plan_fixes(report, unsafe=unsafe)
    result = write_env(env_file, plan, report, dry_run=True)
    return {"schema": "gpudoctor.fix.preview/1", "path": env_file, "diff": result.out,
            "conflicts": list(plan.clashes) + list(result.conflicts), "by_hand": list(result.by_hand),
            "left": [item.head() for item in plan.left]}
