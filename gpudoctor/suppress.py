"""Inline suppressions: `# gpudoctor: ignore[GD601]`, `# gpudoctor: ignore[GD601, GD602]`, bare `# gpudoctor: ignore`.

Only real comments count (found with `tokenize`, so the text inside a string literal does not). Codes are kept as
written (upper-cased) so that GD004 can report the ones that name no rule.
"""

from __future__ import annotations

import io
import re
import tokenize
from typing import Dict, Iterable, List

MARKER = re.compile(r"#\s*gpudoctor\s*:\s*ignore\b(?P<rest>.*)$", re.IGNORECASE)
CODES = re.compile(r"^\s*\[(?P<codes>[^\]]*)\]")
ALL = "*"


def _codes(rest: str) -> List[str]:
    match = CODES.match(rest)
    if match is None:
        if rest.lstrip().startswith("["):  # `ignore[GD601` without the closing bracket
            return [rest.strip()]
        return [ALL]
    codes = [code.strip().upper() for code in re.split(r"[,\s]+", match.group("codes")) if code.strip()]
    return codes or [ALL]


def find_suppressions(text: str) -> Dict[str, List[str]]:
    """{"12": ["GD601"]}: line (as a string, JSON-friendly) → codes suppressed there ("*" for all)."""
    if "gpudoctor" not in text.lower():
        return {}
    found: Dict[str, List[str]] = {}
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                match = MARKER.search(token.string)
                if match:
                    found.setdefault(str(token.start[0]), []).extend(_codes(match.group("rest")))
    except (tokenize.TokenError, SyntaxError, IndentationError, ValueError):
        # a file tokenize gives up on: fall back to a line scan
        found = {}
        for number, line in enumerate(text.splitlines(), 1):
            match = MARKER.search(line)
            if match:
                found.setdefault(str(number), []).extend(_codes(match.group("rest")))
    return found


def suppressed(suppressions: Dict[str, List[str]], rule_id: str, lines) -> bool:
    """Is `rule_id` suppressed on any of `lines`?"""
    for line in lines:
        if line is None:
            continue
        codes = suppressions.get(str(line)) or ()
        if ALL in codes or rule_id in codes:
            return True
    return False


def finding_suppressed(scripts: Iterable, finding) -> bool:
    """Is a finding that points at a line of an analysed script silenced by a comment on that line?"""
    where = finding.location
    if where is None or where.line is None:
        return False
    return any(isinstance(script, dict) and script.get("path") == where.path
               and suppressed(script.get("suppressions") or {}, finding.rule, [where.line]) for script in scripts)
