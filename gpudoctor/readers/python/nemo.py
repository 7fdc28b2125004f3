"""Jobs that a nemo_run launcher script describes: each `run.SlurmExecutor(...)` / `run.LocalExecutor(...)` /
`run.DockerExecutor(...)` created with literal `ntasks_per_node` (the ranks per node; with `launcher="torchrun"`
torchrun starts them) and, for Slurm and Docker, `gpus_per_node` / `num_gpus` (the GPUs a node gets)."""

from __future__ import annotations

import ast
from typing import Dict, List

from gpudoctor.readers.launch import finish_job
from gpudoctor.readers.python.names import literal, qualified_name, segment
from gpudoctor.readers.python.tree import Tree

GPU_KEYWORDS = ("gpus_per_node", "num_gpus")


def _keyword(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def jobs(tree: Tree, lines: List[str], path: str, aliases: Dict[str, str]) -> List[dict]:
    """The executors of a parsed script (`aliases`: its imports, names.module_aliases)."""
    found = []
    for node in tree.walk():
        if not isinstance(node, ast.Call):
            continue
        name = qualified_name(node.func, aliases)
        if not (name.startswith("nemo_run.") and name.endswith("Executor")):
            continue
        tasks = literal(_keyword(node, "ntasks_per_node"))
        if not isinstance(tasks, int) or isinstance(tasks, bool):
            continue
        launcher = literal(_keyword(node, "launcher"))
        gpus = None
        for keyword in GPU_KEYWORDS:
            value = _keyword(node, keyword)
            count = literal(value) if value is not None else None
            if isinstance(count, int) and not isinstance(count, bool):
                gpus = {"count": count, "line": value.lineno, "what": f"{keyword}={count}", "path": path}
        executor = name.rsplit(".", 1)[-1]
        found.append(finish_job({
            "path": path, "line": node.lineno, "kind": "nemo_run", "context": f"nemo_run {executor}",
            "conditional": False, "command": segment(lines, node, 80),
            "launchers": [{"name": f"nemo_run {executor}", "line": node.lineno, "ranks_per_node": tasks,
                           "source": f"ntasks_per_node={tasks}" + (f", launcher={launcher!r}"
                                                                   if isinstance(launcher, str) else "")}],
            "gpus": gpus, "script": None, "env_sets": []}))
    return found
