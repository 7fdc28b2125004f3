"""Static analysis of training scripts (`ast`; the script is never imported or run).

`analyse(path, raw)` returns the facts one script contributes (`analyse_source`: of a script already parsed), which
`add_to_snapshot` puts into a snapshot for `gpudoctor lint train.py` and `gpudoctor check --script train.py`:

- `facts["scripts"]`: one entry per script (process starts with their call path and `__main__` guard,
  CUDA_VISIBLE_DEVICES set after CUDA initialisation, nemo_run runs without `direct=True`, inline suppressions,
  how it expects to be launched: `launch`, see gpudoctor.readers.python.distributed; broadcast_object_list lists
  that cannot receive: `broadcasts`, gpudoctor.readers.python.broadcast; how its DataLoaders split the data between
  ranks: `data`, gpudoctor.readers.python.samplers);
- `facts["requests"]`: precision (`bf16`, `fp16`, `fp8`), `tensor_parallel` and DataLoader `workers` requests;
- `facts["inputs"]`: files that could not be parsed (GD003), with line and column.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from gpudoctor.readers.inputs import add_input_error
from gpudoctor.readers.python.source import Problem, Source, decode, parse
from gpudoctor.readers.python.tree import Tree

REQUEST_KINDS = ("bf16", "fp16", "fp8", "tensor_parallel", "workers", "adapters")
# Which rule consumes which request, so that `# gpudoctor: ignore[GD201]` on the line drops the request.
REQUEST_RULES = {"bf16": "GD201", "fp8": "GD202", "tensor_parallel": "GD408", "workers": "GD503", "adapters": "GD312"}


@dataclass
class Analysis:
    """What one script contributes to a snapshot."""

    script: Optional[Dict[str, Any]]
    requests: Dict[str, List[dict]] = field(default_factory=dict)
    problems: List[Problem] = field(default_factory=list)


def analyse(path: str, raw: bytes) -> Analysis:
    """Analyse one script's bytes. Never raises for any input."""
    text, problems = decode(raw)
    return analyse_source(path, parse(text, path), problems)


def analyse_source(path: str, source: Source, problems: List[Problem], tree: Optional[Tree] = None) -> Analysis:
    """Analyse a parsed script (`problems`: those met decoding it; `tree`: its walk, when the caller has it). Never
    raises for any input."""
    problems = problems + source.problems
    if source.tree is None:
        return Analysis(None, {}, problems)
    try:
        return _analyse_tree(path, tree or Tree(source.tree), source.lines, source.text, problems)
    except (RecursionError, MemoryError):
        problems.append(Problem("too deeply nested to analyse (nested calls or blocks exhaust the analyser's stack)"))
        return Analysis(None, {}, problems)


def _analyse_tree(path: str, tree: Tree, lines: List[str], text: str, problems: List[Problem]) -> Analysis:
    from gpudoctor.readers.python.broadcast import object_broadcasts
    from gpudoctor.readers.python.distributed import distributed_features
    from gpudoctor.readers.python.names import is_main_guard, module_aliases
    from gpudoctor.readers.python.requests import find_requests
    from gpudoctor.readers.python.samplers import data_splitting
    from gpudoctor.readers.python.walker import Walker
    from gpudoctor.suppress import find_suppressions

    walker = Walker(tree, lines)
    events = walker.run()
    suppressions = find_suppressions(text)
    requests, frameworks = find_requests(tree, lines, path)
    for kind, rule in REQUEST_RULES.items():
        requests[kind] = [r for r in requests.get(kind, []) if not _suppressed(suppressions, rule, r.get("line"))]
    guard = next((node.lineno for node in tree.body if isinstance(node, ast.If) and is_main_guard(node.test) is True),
                 None)
    script = {
        "path": path,
        "main_guard_line": guard,
        "process_starts": _process_starts(events),
        "cuda_visible_devices_late": _late_cvd(events),
        "nemo_run_not_direct": _nemo_runs(events),
        "suppressions": suppressions,
        "frameworks": frameworks,
        "truncated": walker.truncated,
        "launch": distributed_features(tree, lines),
    }
    aliases = module_aliases(tree)
    script["broadcasts"] = object_broadcasts(tree, lines, aliases)
    script["data"] = data_splitting(tree, lines, aliases)
    return Analysis(script, requests, problems)


def _suppressed(suppressions: Dict[str, List[str]], rule: str, line: Optional[int]) -> bool:
    codes = suppressions.get(str(line)) or ()
    return "*" in codes or rule in codes


def _path(event) -> List[str]:
    return list(event.path)


def _process_starts(events) -> List[dict]:
    starts: Dict[tuple, dict] = {}
    method, method_line = None, None
    for event in events:
        if event.kind == "method":
            method, method_line = event.data.get("method"), event.line
            continue
        if event.kind != "start":
            continue
        start_method = event.data.get("method") or "default"
        source = None
        if start_method == "default" and method:
            start_method, source = method, f"set_start_method({method!r}) at line {method_line}"
        entry = {"line": event.line, "column": event.column, "call": event.data.get("call"),
                 "what": event.data.get("what"), "path": _path(event), "guarded": event.guarded,
                 "start_method": start_method, "start_method_source": source}
        key = (event.line, entry["call"])  # `next(iter(loader))` is one start, not two
        if key not in starts or (starts[key]["guarded"] and not event.guarded):
            starts[key] = entry
    return sorted(starts.values(), key=lambda e: (e["line"], e["column"]))


def _late_cvd(events) -> List[dict]:
    first_cuda = None
    late: Dict[int, dict] = {}
    for event in events:
        if event.kind == "cuda" and first_cuda is None:
            first_cuda = event
        elif event.kind == "cvd" and first_cuda is not None and event.line not in late:
            late[event.line] = {"line": event.line, "column": event.column, "what": event.data.get("what"),
                                "path": _path(event), "guarded": event.guarded, "cuda_line": first_cuda.line,
                                "cuda_what": first_cuda.data.get("what"), "cuda_path": _path(first_cuda)}
    return sorted(late.values(), key=lambda e: e["line"])


def _nemo_runs(events) -> List[dict]:
    runs: Dict[int, dict] = {}
    for event in events:
        if event.kind != "nemo" or event.data.get("direct") is not False or event.line in runs:
            continue
        data = event.data
        runs[event.line] = {"line": event.line, "column": event.column, "path": _path(event),
                            "guarded": event.guarded, "direct_given": data.get("direct_given"),
                            "devices": data.get("devices"), "num_nodes": data.get("num_nodes"),
                            "evidence": data.get("evidence"), "executor": data.get("executor")}
    return sorted(runs.values(), key=lambda e: e["line"])


def add_to_snapshot(snapshot, path: str, analysis: Analysis) -> None:
    """Merge one script's analysis into a snapshot's facts."""
    facts = snapshot.facts
    scripts = facts.setdefault("scripts", [])
    if analysed(snapshot, path):
        return  # already read: a job file named it, then it was given too (or the other way round)
    for problem in analysis.problems:
        add_input_error(snapshot, path, "script", problem.error, problem.line, problem.column)
    if analysis.script is None:
        return
    scripts.append(analysis.script)
    requests = facts.setdefault("requests", {})
    for kind in REQUEST_KINDS:
        requests.setdefault(kind, []).extend(analysis.requests.get(kind, []))


def analysed(snapshot, path: str) -> bool:
    """Whether the script at `path` is already among the snapshot's scripts."""
    import os.path

    wanted = os.path.normpath(path)
    return any(isinstance(s, dict) and os.path.normpath(str(s.get("path", ""))) == wanted
               for s in snapshot.facts.get("scripts", []) or [])

