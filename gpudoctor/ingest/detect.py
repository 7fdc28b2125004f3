"""Which tool outputs a pasted text contains, in the order they appear.

A text may hold several (an ``nvidia-smi`` screen followed by ``pip show torch``, a ``collect_env`` dump with a
``ds_report`` below it). Detection only decides which parsers run; each parser then reads the parts it
recognises and ignores the rest, so parts may come in any order and be interleaved with prose.
No pattern starts with ``^[ \\t]*`` or another repeat: each starts with a literal, so the regular expression
engine skips quickly through text that cannot match, and a search stays linear even on a 50 MB text.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import List, Pattern, Tuple

from .normalize import Lines
from .registry import FORMATS


@lru_cache(maxsize=1)
def _markers() -> Tuple[Tuple[str, bool, Tuple[Pattern[str], ...]], ...]:
    """(kind, hint, compiled markers) of every format, compiled on the first text. Every marker starts with a
    literal, so the engine's fast literal scan does the work (an alternation, or re.IGNORECASE, would disable it and
    cost ten times more on a large text)."""
    return tuple((fmt.kind, fmt.hint, tuple(re.compile(m) for m in fmt.markers)) for fmt in FORMATS)


def detect(lines: Lines) -> List[str]:
    """The kinds of tool output present in the text, earliest first (hints, such as torch's warnings, last)."""
    low = lines.text.lower()
    found = []
    for kind, hint, patterns in _markers():
        best = -1
        for pattern in patterns:
            m = pattern.search(low)
            if m and (best < 0 or m.start() < best):
                best = m.start()
        if best >= 0:
            found.append((1 if hint else 0, best, kind))
    found.sort()
    return [kind for _, _, kind in found]
