"""The run's timeline in the text report (`check --from DIR`): each rank's first event, the earliest first, at most
a screenful; the ranks that failed first are always shown."""

from __future__ import annotations

from typing import List

from gpudoctor.facts.run import postmortem, ranks_text, timeline

ROWS = 12


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def timeline_lines(run: dict, unplaced: list, width: int = 80) -> List[str]:
    """The lines of the `Run` part: a heading, one line per rank shown, what was left out, what was not placed."""
    found = postmortem(run)
    nodes = run.get("nodes") or []
    head = f"{len(found.ranks)} ranks" + (f" on {len(nodes)} node{'s' if len(nodes) != 1 else ''}" if nodes else "")
    if found.first:
        head += f" · failed first: {ranks_text(found.first)}"
    elif found.alike:
        head += " · every rank failed the same way"
    lines = [head, f"order: {found.basis}"]
    rows = timeline(run, ROWS)
    for row in rows:
        when = ("≥ " if row.get("time_from") == "above" else "") + (row.get("time") or "no time")
        where = f" ({row['where']})" if row.get("where") else ""
        lines.append(f"{when} · {row['rank']} {row.get('role') or 'silent'}: {_short(row.get('what') or '', 120)}"
                     f"{where}")
    shown = len(rows)
    listed = sum(1 for r in found.ranks if r.get("first_cause") or r.get("first_waiting") or r in found.silent)
    if listed > shown:
        lines.append(f"… {listed - shown} more rank(s) (`--format json` lists every rank's first event)")
    if unplaced:
        names = ", ".join(u.get("path", "?") for u in unplaced[:3])
        lines.append(_short(f"not placed: {len(unplaced)} file(s) that are no log or dump ({names}"
                            f"{', …' if len(unplaced) > 3 else ''})", width * 2))
    return lines
