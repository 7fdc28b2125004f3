"""Jobs that a nemo_run launcher script describes: each `run.SlurmExecutor(...)` / `run.LocalExecutor(...)` /
`run.DockerExecutor(...)` created with literal `ntasks_per_node` (the ranks per node; with `launcher="torchrun"`
torchrun starts them) and, for Slurm and Docker, `gpus_per_node` / `num_gpus` (the GPUs a node gets). Where the
executor does not say (a LocalExecutor runs on this machine), the GPUs a node gets are those the file's recipes and
trainers ask for: `num_gpus_per_node=1` on a recipe, `devices=1` on a trainer, `recipe.trainer.devices = 1`, when
each is a literal and they agree."""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.readers.launch import finish_job
from gpudoctor.readers.python.names import literal, qualified_name, segment
from gpudoctor.readers.python.tree import Tree

GPU_KEYWORDS = ("gpus_per_node", "num_gpus")
RECIPE_KEYWORDS = ("num_gpus_per_node", "devices")  # a NeMo recipe's and a Lightning/NeMo trainer's GPUs per node


def _keyword(call: ast.Call, name: str):
    return next((kw.value for kw in call.keywords if kw.arg == name), None)


def _asked(value: ast.expr, what: str) -> Tuple[Any, int, str]:
    """(the count a request asks for, or NO_VALUE; its line; `what=count`)."""
    count = literal(value)
    return count, value.lineno, f"{what}={count}" if isinstance(count, int) else what


def recipe_gpus(tree: Tree, path: str) -> Optional[dict]:
    """The GPUs per node the file's recipes and trainers ask for, where every request is a literal integer and
    they agree; None otherwise (none, one read from elsewhere, or several counts)."""
    asked = []
    for node in tree.walk():
        if isinstance(node, ast.Call):
            asked += [_asked(kw.value, kw.arg) for kw in node.keywords if kw.arg in RECIPE_KEYWORDS]
        elif isinstance(node, ast.Assign):
            asked += [_asked(node.value, ast.unparse(target)) for target in node.targets
                      if isinstance(target, ast.Attribute) and target.attr == "devices"
                      and isinstance(target.value, ast.Attribute) and target.value.attr == "trainer"]
    counts = {count for count, _, _ in asked}
    if len(counts) != 1 or not all(isinstance(count, int) and not isinstance(count, bool) for count in counts):
        return None
    count, line, what = min(asked, key=lambda item: item[1])  # the first in the file
    return {"count": count, "line": line, "what": what, "path": path}


def jobs(tree: Tree, lines: List[str], path: str, aliases: Dict[str, str]) -> List[dict]:
    """The executors of a parsed script (`aliases`: its imports, names.module_aliases)."""
    found = []
    recipe: Optional[dict] = None
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
        if gpus is None:
            recipe = recipe or recipe_gpus(tree, path)
            gpus = dict(recipe, what=f"{recipe['what']} (the recipe)") if recipe else None
        executor = name.rsplit(".", 1)[-1]
        found.append(finish_job({
            "path": path, "line": node.lineno, "kind": "nemo_run", "context": f"nemo_run {executor}",
            "conditional": False, "command": segment(lines, node, 80),
            "launchers": [{"name": f"nemo_run {executor}", "line": node.lineno, "ranks_per_node": tasks,
                           "source": f"ntasks_per_node={tasks}" + (f", launcher={launcher!r}"
                                                                   if isinstance(launcher, str) else "")}],
            "gpus": gpus, "script": None, "env_sets": []}))
    return found
