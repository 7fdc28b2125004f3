"""GD615: `#SBATCH` directives sbatch never reads — after the first command of the batch script, or misspelt
(`facts["launch"]["jobs"][*]["ignored_directives"]`, gpudoctor.readers.shell.slurm)."""

from __future__ import annotations

import re

from gpudoctor.checks import check
from gpudoctor.facts.jobs import jobs
from gpudoctor.model import Location, Severity

# what the job is then run without: the resources whose absence breaks a GPU job rather than slowing it
RESOURCES = re.compile(r"--(gres|gpus|gpus-per-node|gpus-per-task|nodes|ntasks|ntasks-per-node)\b|\s-[NnG]\s*\d")


@check("GD615")
def sbatch_directive_ignored(facts, rule):
    seen = set()
    for job in jobs(facts):
        for item in job.get("ignored_directives") or []:
            if not isinstance(item, dict) or (job.get("path"), item.get("line")) in seen:
                continue
            seen.add((job.get("path"), item.get("line")))
            first = item.get("first_command") or {}
            resource = bool(RESOURCES.search(item.get("text", "")))
            why = ("is not an #SBATCH directive: sbatch reads only lines that start with `#SBATCH` exactly"
                   if item.get("misspelt") else
                   f"comes after the batch script's first command (line {first.get('line')}: `{first.get('text')}`): "
                   "sbatch stops reading #SBATCH directives there")
            yield rule.finding(
                f"`{item.get('text')}` {why}, so the job runs without it"
                + (" — with the partition's default GPUs, nodes or tasks (often none: \"no CUDA GPUs are "
                   "available\")" if resource else ""),
                severity=None if resource else Severity.WARNING,
                location=Location(job.get("path", "?"), item.get("line")),
                evidence={"job": job.get("path"), "line": item.get("line"), "directive": item.get("text"),
                          "first_command_line": first.get("line"), "misspelt": bool(item.get("misspelt"))},
                fix=rule.fix(case="misspelt", values={"directive": item.get("text", "").split()[0]})
                if item.get("misspelt") else rule.fix(values={"line": first.get("line")}))
