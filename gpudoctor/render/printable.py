"""Untrusted text made safe for a terminal: a file name, a snapshot's value or a pasted line holding an escape
sequence (CSI, OSC, clear-screen), a carriage return, or a right-to-left override is shown escaped (`\\x1b`,
`\\u202e`), never acted on. Applied to every human format (an `Output` with `human` in gpudoctor.render.FORMATS)
and every error line."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Mapping
from typing import Any, Optional

# C0 controls but tab and newline, DEL, C1 controls, and Unicode's invisible direction controls and separators
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\t\n]|" + _CONTROL.pattern)
_PATH_KEYS = ("path", "paths", "file", "name")  # one-line values: a newline in a file name is escaped too


def _escape(match: re.Match) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, one_line: bool = False) -> str:
    """The text with control characters escaped (`one_line`: newlines and tabs too)."""
    return (_CONTROL_OR_NEWLINE if one_line else _CONTROL).sub(_escape, text)


def printable_data(node: Any, one_line: bool = False, memo: Optional[dict] = None) -> Any:
    """A copy of a value (dicts, lists, frozen dataclasses such as a Report) with every string `printable`. A string,
    or a container met again (the verdicts that a fleet's nodes share), is made printable once."""
    if type(node) in _SCALARS or node is None or isinstance(node, (enum.Enum, bool, int, float)):
        return node
    memo = {} if memo is None else memo
    key = (node if isinstance(node, str) else id(node), one_line)
    if key in memo:
        return memo[key][0]
    if isinstance(node, str):
        done: Any = printable(node, one_line)
    elif isinstance(node, Mapping):
        done = {name: printable_data(value, name in _PATH_KEYS, memo) for name, value in node.items()}
    elif isinstance(node, (list, tuple)):
        done = type(node)(printable_data(item, one_line, memo) for item in node)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        done = dataclasses.replace(node, **{f.name: printable_data(getattr(node, f.name), f.name in _PATH_KEYS, memo)
                                            for f in dataclasses.fields(node) if f.init})
    else:
        return node
    memo[key] = (done, node)  # the node is kept alive with its copy: its id is never reused within the walk
    return done


_SCALARS = frozenset((int, float, bool))
