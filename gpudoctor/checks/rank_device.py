"""GD616: a global rank (RANK, `dist.get_rank()`, SLURM_PROCID) used as the CUDA device index
(`facts["scripts"][*]["launch"]["global_rank_device"]`, gpudoctor.readers.python.rank_device), judged against the
nodes the jobs that start the script run on."""

from __future__ import annotations

from typing import Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.jobs import job_label, jobs, script_of, scripts
from gpudoctor.model import Location, Severity

ACROSS_NODES = {"srun", "mpirun", "training-operator"}


def job_nodes(job: dict) -> Tuple[Optional[int], str]:
    """The nodes a job's ranks run on, and what says so: a launcher's rendezvous (`--nnodes`, `--num_machines`),
    `--standalone` (one), else the scheduler's nodes when srun/mpirun spread the ranks over them; None: unknown."""
    for launcher in job.get("launchers", []):
        nodes = launcher.get("nodes") or {}
        if isinstance(nodes.get("count"), int):
            return nodes["count"], f"`{nodes.get('what')}`"
    if "--standalone" in str(job.get("command", "")).split():
        return 1, "`--standalone`"
    nodes = job.get("nodes") or {}
    if isinstance(nodes.get("count"), int) and {entry.get("name") for entry in job.get("launchers", [])} & ACROSS_NODES:
        return nodes["count"], f"`{nodes.get('what')}`"
    return None, ""


@check("GD616")
def global_rank_as_device(facts, rule):
    for script in scripts(facts):
        uses = (script.get("launch") or {}).get("global_rank_device") or []
        if not uses:
            continue
        starting = [job for job in jobs(facts) if script_of(facts, job) is script]
        counted = [(job, *job_nodes(job)) for job in starting]
        if counted and all(nodes == 1 for _, nodes, _ in counted):
            continue  # one node: the global rank is the local rank
        several = next(((job, nodes, what) for job, nodes, what in counted if nodes and nodes > 1), None)
        first = uses[0]
        more = f" (also line {', '.join(str(u.get('line')) for u in uses[1:5])})" if len(uses) > 1 else ""
        if several:
            job, nodes, what = several
            context = (f"{job_label(job)} runs on {nodes} nodes ({what} at {job.get('path')}:{job.get('line')}): on "
                       "the second node ranks start past the node's GPUs, \"CUDA error: invalid device ordinal\"")
            severity = None
        else:
            context = ("right only while the job runs on one node: on the second node ranks start past the node's "
                       "GPUs (\"CUDA error: invalid device ordinal\")")
            severity = Severity.WARNING if starting else Severity.INFO
        yield rule.finding(
            f"`{first.get('what')}`{more} uses the global rank ({first.get('rank')}) as the CUDA device; "
            f"LOCAL_RANK is the GPU on the node. {context[0].upper() + context[1:]}",
            severity=severity, location=Location(str(script.get("path")), first.get("line")),
            evidence={"uses": uses[:5], "nodes": several[1] if several else None},
            fix=rule.fix(values={"script": script.get("path"), "line": first.get("line")}))
