"""Near misses of a name: one letter left out, added, replaced, or two neighbours swapped."""

from __future__ import annotations

from typing import Iterable, List


def closest(word: str, candidates: Iterable[str], cutoff: float) -> List[str]:
    """The candidate most like `word` by difflib's ratio, at least `cutoff`, as a list of one, or []. difflib is
    imported on the first call: most runs have no near miss to name (start-up time)."""
    import difflib

    return difflib.get_close_matches(word, candidates, n=1, cutoff=cutoff)


def one_slip(word: str, target: str) -> bool:
    """`word` is one slip from `target` (Damerau distance 1), and not `target` itself."""
    if abs(len(word) - len(target)) > 1 or word == target:
        return False
    if len(word) == len(target):
        diff = [i for i, (a, b) in enumerate(zip(word, target)) if a != b]
        return len(diff) == 1 or (len(diff) == 2 and diff[1] == diff[0] + 1
                                  and word[diff[0]] == target[diff[1]] and word[diff[1]] == target[diff[0]])
    short, long_ = sorted((word, target), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))
