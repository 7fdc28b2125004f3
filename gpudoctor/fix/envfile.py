"""`fix --write-env PATH`: merge a plan's changes into a .env file (gpudoctor.fix.envmerge does the merge) and say
what happened. Problems with the file are InputErrors: one line, exit 2 on the command line."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List

from gpudoctor.errors import InputError
from gpudoctor.fix import Plan
from gpudoctor.fix.envmerge import MergeError, merge, read_env, same_file, unified_diff
from gpudoctor.model import Report
from gpudoctor.render.printable import printable


@dataclass
class EnvWrite:
    """What a write (or a dry run) did: `out` for stdout, conflicts and by-hand steps for stderr."""

    out: str
    conflicts: List[str] = field(default_factory=list)
    by_hand: List[str] = field(default_factory=list)


def unread_lines(report: Report, path: str) -> list:
    """The lines of the file that gpudoctor could not read (GD003), so it judged them not."""
    return [item.get("line") for item in report.facts.get("inputs") or []
            if isinstance(item, dict) and item.get("severity") != "info" and same_file(str(item.get("path")), path)]


def write_env(path: str, plan: Plan, report: Report, force: bool = False, dry_run: bool = False) -> EnvWrite:
    """Merge `plan`'s changes into `path` (or, with `dry_run`, only show the diff)."""
    from gpudoctor.files import write_file

    try:
        old = read_env(path)
    except IsADirectoryError:
        raise InputError(f"cannot write {path!r}: is a directory") from None
    except OSError as exc:
        raise InputError(f"cannot read {path!r}: {exc.strerror or exc}") from None
    try:
        result = merge(old, plan.changes, path, force=force)
    except MergeError as exc:
        raise InputError(f"{path}: {exc}") from None
    summary, shown = result.summary(), printable(path, one_line=True)
    unread = unread_lines(report, path)
    if dry_run:
        out = unified_diff(result.old, result.new, shown) + f"{summary} Nothing written (--dry-run).\n"
    elif result.new != result.old:
        try:
            write_file(path, result.new, force=force)
        except OSError as exc:
            raise InputError(f"cannot write {path!r}: {exc.strerror or exc} (the file is unchanged)") from None
        out = f"{summary} Wrote {shown}.\n"
    elif unread:  # never "up to date" about lines nobody judged
        where = ", ".join(str(line) for line in unread if line) or "?"
        out = (f"{summary} Nothing written; line(s) {where} of {shown} could not be read, so they were not judged "
               "(GD003).\n")
    else:
        out = f"{summary} {shown} is up to date.\n" if not result.conflicts else f"{summary} Nothing written.\n"
    return EnvWrite(out, [conflict.message(path) for conflict in result.conflicts],
                    [todo for _change, todo in result.elsewhere])
