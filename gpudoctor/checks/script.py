"""GD6xx: training-script mistakes found statically (`facts["scripts"]`, filled by gpudoctor.readers.python).
Without a script these rules pass silently."""

from __future__ import annotations

from typing import Optional, Tuple

from gpudoctor.checks import check
from gpudoctor.facts.log_evidence import cited, log_events
from gpudoctor.knowledge import Release, version
from gpudoctor.model import Location, Severity
from gpudoctor.suppress import suppressed

GUARD = 'if __name__ == "__main__":'
START_METHODS_DOCS = "https://docs.python.org/3/library/multiprocessing.html#the-spawn-and-forkserver-start-methods"
BOOTSTRAP = ('"An attempt has been made to start a new process before the current process has finished its '
             'bootstrapping phase"')


def _scripts(facts) -> list:
    return [s for s in facts.get("scripts", []) or [] if isinstance(s, dict)]


def _suppressed(script: dict, rule_id: str, lines: list) -> bool:
    return suppressed(script.get("suppressions") or {}, rule_id, lines)


def _frame_lines(path: list) -> list:
    lines = []
    for frame in path or []:
        _, _, line = str(frame).rpartition(":")
        if line.isdigit():
            lines.append(int(line))
    return lines


def render_path(path: list) -> str:
    """["<module>:28", "main:17", "launch:14"] → 'module level line 28 → main() line 17 → launch() line 14'."""
    parts = []
    for frame in path or []:
        name, _, line = str(frame).rpartition(":")
        where = "module level" if name == "<module>" else f"{name}()"
        parts.append(f"{where} line {line}")
    return " → ".join(parts)


def _where(script: dict, item: dict) -> Location:
    return Location(script.get("path", "?"), item.get("line"), item.get("column"))


def default_start_method(facts) -> Tuple[Optional[str], str]:
    """The default multiprocessing start method of the machine the job runs on, where it is known."""
    os_name = str(facts.get("host.os", "") or "")
    python = facts.get("torch.python_version", None) or facts.get("host.python", None)
    lowered = os_name.lower()
    if lowered.startswith(("darwin", "macos", "mac os")):
        return "spawn", f"{os_name}: spawn is the default on macOS"
    if lowered.startswith("windows"):
        return "spawn", f"{os_name}: spawn is the only method on Windows"
    if lowered.startswith("linux") and python:
        parsed = version(python)
        if parsed is None:
            return None, ""
        if parsed >= Release("3.14"):
            return "forkserver", f"Linux, Python {python}: forkserver is the default from Python 3.14"
        return "fork", f"Linux, Python {python}: fork is the default up to Python 3.13"
    return None, ""


def missing_main_guard_in_log(facts, rule):
    for event in log_events(facts, "spawn_bootstrap")[:1]:
        script = event.get("script")
        where = f" ({script}, line {event.get('script_line')}, runs at module level)" if script else ""
        yield rule.finding(
            f"the log shows a process was started while the script was still being imported{where}: "
            f"{event['line']}",
            evidence={**cited(event), "script": script, "script_line": event.get("script_line")},
            fix=rule.fix(case="from_log", values={"script": script} if script else {}))


@check("GD601", from_log=missing_main_guard_in_log)
def missing_main_guard(facts, rule):
    """One finding per script: its first unguarded start of the most severe kind, the others listed in it (the job
    stops at the first one; one fix covers them all)."""
    for script in _scripts(facts):
        found = list(_unguarded_starts(facts, rule, script))
        if not found:
            continue
        worst = max(found, key=lambda item: (item["severity"], -found.index(item)))
        others = sorted({item["evidence"]["line"] for item in found if item is not worst and item["evidence"]["line"]})
        if others:
            worst["message"] += (f" {len(others)} more start(s) outside the guard: line(s) "
                                 f"{', '.join(map(str, others))}; the same fix covers them.")
            worst["evidence"]["other_lines"] = others
        yield rule.finding(**worst)


def _unguarded_starts(facts, rule, script: dict):
    """What GD601 says about each process start of `script` outside the main guard (fork starts are fine)."""
    guard_line = script.get("main_guard_line")
    for start in script.get("process_starts", []) or []:
        if start.get("guarded"):
            continue
        path = start.get("path") or []
        if _suppressed(script, rule.id, [start.get("line")] + _frame_lines(path)):
            continue
        method = start.get("start_method") or "default"
        if method == "fork":
            continue
        severity = Severity.ERROR
        call = start.get("call") or "a process start"
        if method in ("spawn", "forkserver"):
            source = start.get("start_method_source")
            if call.startswith("nemo_run"):
                why = ("NeMo-Run starts the task in child processes that re-import the script, so this line runs "
                       f"again in each of them (\"Failure to acquire lock\", or {BOOTSTRAP}).")
            else:
                why = (f"The start method is {method} ({source})" if source
                       else f"{call} always uses the {method} start method")
                why += f": each child re-imports the script, reaches this line again and fails with {BOOTSTRAP}."
        else:
            known, context = default_start_method(facts)
            if known == "fork":
                severity = Severity.INFO
                why = (f"It works today with fork ({context}) but breaks with spawn (macOS, Windows) and with "
                       "forkserver, the Linux default from Python 3.14.")
            elif known in ("spawn", "forkserver"):
                why = (f"The default start method here is {known} ({context}): each child re-imports the script "
                       f"and fails with {BOOTSTRAP}.")
            else:
                severity = Severity.WARNING
                why = ("Affected start methods: spawn (the default on macOS and Windows) and forkserver (the Linux "
                       f"default from Python 3.14), where each child re-imports the script and fails with "
                       f"{BOOTSTRAP}; only fork (Linux, Python ≤ 3.13) tolerates it.")
        route = render_path(path)
        reached = "at module level" if len(path) <= 1 else f"reached from {route}"
        message = f"{start.get('what') or call} starts processes outside `{GUARD}` ({reached}). {why}"
        if guard_line:
            fix = rule.fix(case="guarded", values={"where": route.split(" → ")[0], "guard_line": guard_line},
                           docs=START_METHODS_DOCS)
        else:
            fix = rule.fix(docs=START_METHODS_DOCS)
        yield dict(
            message=message,
            severity=severity,
            location=_where(script, start),
            evidence={"path": script.get("path"), "line": start.get("line"), "call": call,
                      "call_path": list(path), "start_method": method, "main_guard_line": guard_line},
            fix=fix)


@check("GD602")
def cuda_visible_devices_set_late(facts, rule):
    for script in _scripts(facts):
        for item in script.get("cuda_visible_devices_late", []) or []:
            if _suppressed(script, rule.id, [item.get("line")] + _frame_lines(item.get("path"))[:1]):
                continue
            where = _where(script, item)
            cuda = f"line {item.get('cuda_line')} ({item.get('cuda_what')})"
            yield rule.finding(
                f"{item.get('what') or 'CUDA_VISIBLE_DEVICES is set'} runs after CUDA may already be "
                f"initialised at {cuda}, reached from {render_path(item.get('cuda_path'))}. The CUDA driver reads "
                "CUDA_VISIBLE_DEVICES once, when it initialises, and torch caches the device count: the assignment "
                "has no effect and the job sees every GPU (or the wrong one).",
                location=where,
                evidence={"path": script.get("path"), "line": item.get("line"), "cuda_line": item.get("cuda_line"),
                          "cuda_what": item.get("cuda_what"), "call_path": item.get("path")},
                fix=rule.fix())


@check("GD603")
def nemo_run_single_gpu_not_direct(facts, rule):
    for script in _scripts(facts):
        for item in script.get("nemo_run_not_direct", []) or []:
            if item.get("devices") != 1 or item.get("num_nodes") not in (None, 1):
                continue
            if item.get("executor") not in (None, "local"):
                continue
            where = _where(script, item)  # a `# gpudoctor: ignore` on this line is honoured by the engine
            how = "direct=False" if item.get("direct_given") else "without direct=True"
            yield rule.finding(
                f"run.run(...) {how} for a single-device recipe ({item.get('evidence')}): NeMo-Run "
                "packages the task and launches it through an executor (a torchrun child process with distributed "
                "and NCCL initialisation) where one GPU needs none of that.",
                location=where,
                evidence={"path": script.get("path"), "line": item.get("line"), "devices": item.get("devices"),
                          "evidence": item.get("evidence"), "executor": item.get("executor")},
                fix=rule.fix(docs="https://docs.nvidia.com/nemo-framework/user-guide/latest/"
                                                  "nemo-2.0/quickstart.html"))
