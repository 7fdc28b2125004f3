"""GD614: the options a job passes to its script (`facts["launch"]["jobs"][*]["script"]["args"]`) against the options
the script's own argparse parser takes and requires (`scripts[*].launch.command_line`, where the script shows all of
them). argparse stops every rank at once on an option it does not know, or a required one missing."""

from __future__ import annotations

import re
from typing import List, Optional

from gpudoctor.checks import check
from gpudoctor.facts.jobs import job_label, jobs_with_scripts, where
from gpudoctor.spelling import closest

NUMBER = re.compile(r"^-\d+(\.\d*)?([eE][-+]?\d+)?$|^-\.\d+")


def _accepted(name: str, options: List[str], abbrev: bool) -> bool:
    if name in options:
        return True
    if name.startswith("--"):
        return abbrev and any(option.startswith(name) for option in options if option.startswith("--"))
    return any(len(option) == 2 and name.startswith(option) for option in options)  # `-b32`, `-vv`


def refused(args: List[str], command_line: dict) -> List[str]:
    """The option words of `args` the parser does not take (up to `--`; negative numbers are values)."""
    found = []
    for word in args:
        if word == "--":
            break
        if not word.startswith("-") or word == "-" or NUMBER.match(word):
            continue
        name = word.split("=", 1)[0]
        if not _accepted(name, command_line.get("options") or [], command_line.get("allow_abbrev", True)):
            found.append(name)
    return found


def missing(args: List[str], command_line: dict) -> List[str]:
    given = {word.split("=", 1)[0] for word in args if word.startswith("-")}
    return [option for option in command_line.get("required") or []
            if not any(name == option or (name.startswith("--") and option.startswith(name)) for name in given)]


def _nearest(name: str, options: List[str]) -> Optional[str]:
    close = closest(name, [o for o in options if o.startswith("--")], 0.75)
    return close[0] if close else None


@check("GD614")
def script_option_refused(facts, rule):
    for job, script, features in jobs_with_scripts(facts):
        command_line, passed = features.get("command_line"), job.get("script") or {}
        if not isinstance(command_line, dict) or not isinstance(passed.get("args"), list):
            continue
        args = [str(word) for word in passed["args"]]
        at = f"{script['path']}:{command_line.get('line')}"
        unknown = refused(args, command_line)
        absent = missing(args, command_line) if passed.get("args_known") else []
        if not unknown and not absent:
            continue
        parts, hints = [], []
        if unknown:
            parts.append(f"passes {', '.join(unknown)}, which the script's argparse ({at}) does not define: every rank "
                         f"stops with `error: unrecognized arguments: {unknown[0]}`")
            hints = [f"{name} → {near}" for name in unknown if (near := _nearest(name, command_line["options"]))]
        if absent:
            parts.append(f"{'and ' if unknown else ''}does not pass {', '.join(absent)}, which the script requires "
                         f"({at}): every rank stops with `error: the following arguments are required: "
                         f"{', '.join(absent)}`")
        message = f"{job_label(job)} " + "; ".join(parts)
        if hints:
            message += f" (did you mean {', '.join(hints)}?)"
        values = {"script": script["path"], "options": ", ".join(unknown or absent)}
        yield rule.finding(
            message, location=where(job),
            evidence={"job": job.get("path"), "line": job.get("line"), "script": script["path"],
                      "refused": unknown, "missing": absent, "parser_line": command_line.get("line")},
            fix=rule.fix(values=values) if unknown else rule.fix(case="missing", values=values))
