"""A rule's verdict reused on the nodes of a fleet whose facts that rule read are the same.

A rule is a function of the facts it reads through gpudoctor.facts.Facts (tests/test_memo.py holds every rule of
the catalog to that). Judged on one node, its verdict is kept with the value of every path it read, in the order it
read them (`Facts.watching`), under the node's context: what the engine decides by beside the rule's reads (the
inputs given, what the logs show, where the facts came from, the scripts' ignore comments). Another node with the
same context and the same values at those paths takes the same path through the rule's code and gets the same
verdict: findings, passed, unknown (and why) or not applicable; a value a finding quotes is one of the values
compared. Values are compared exactly: their type and their repr (1, 1.0 and true differ, and so does key order).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, Callable, Dict, Hashable, Mapping, Optional, Tuple, TypeVar

from gpudoctor.facts import NOWHERE, WHOLE, Facts
from gpudoctor.verdict import Verdict

SHAPES = 32  # different sequences of paths one rule read, kept per context
KEPT = 4096  # verdicts kept per sequence of paths (a rule that reads what every node has of its own: GPU UUIDs)
_EXACT = frozenset((int, bool, type(None)))
T = TypeVar("T", bound=tuple)
Verdicts = Dict[Tuple[str, ...], Tuple[Callable[[Mapping[str, Hashable]], Hashable], Dict[Hashable, Verdict]]]


def exact(value: Any, texts: Dict[int, Tuple[Any, str]]) -> Hashable:
    """A key equal for two values only when they are the same: a string itself; type and value for an integer, a
    boolean or null; type and repr for anything else (`texts`: the reprs made so far, by id, each with its value,
    kept alive so that its id is never another's)."""
    kind = type(value)
    if kind is str or value is NOWHERE:
        return value
    if kind in _EXACT:
        return kind, value
    made = texts.get(id(value))
    if made is None:
        made = texts[id(value)] = (value, repr(value))
    return kind, made[1]


class _Keys(dict):
    """Each path's key on one node (`exact`), made the first time a rule's paths ask for it."""

    def __init__(self, facts: Facts, texts: Dict[int, Tuple[Any, str]]) -> None:
        super().__init__()
        self.facts = facts
        self.texts = texts

    def __missing__(self, path: str) -> Hashable:
        key = self[path] = exact(self.facts.value_at(path), self.texts)
        return key


class Node:
    """One node as the memo sees it: its context and the keys of the paths rules read on it."""

    def __init__(self, facts: Facts, kept: Tuple[Dict[str, Verdict], Dict[str, Verdicts]],
                 texts: Dict[int, Tuple[Any, str]]) -> None:
        self.fixed, self.kept = kept  # the memo's verdicts for the node's context, by rule: of rules that read
        self._keys = _Keys(facts, texts)  # nothing (the same on every such node), of the others

    def recall(self, rule_id: str) -> Optional[Verdict]:
        """The verdict kept for a node whose values are this node's at every path the rule read there; None."""
        found = self.fixed.get(rule_id)
        if found is not None:
            return found
        for keys_of, verdicts in self.kept.get(rule_id, {}).values():
            found = verdicts.get(keys_of(self._keys))
            if found is not None:
                return found
        return None

    def keep(self, rule_id: str, seen: Mapping[str, Any], verdict: Verdict) -> None:
        """Keep a verdict with what the rule read (`seen`, from Facts.watching: the values the keys are made of);
        not one that read every fact at once (a site policy's condition), nor more than SHAPES × KEPT per rule."""
        if any(value is WHOLE for value in seen.values()):
            return
        if not seen:
            self.fixed[rule_id] = verdict
            return
        shapes = self.kept.setdefault(rule_id, {})
        paths = tuple(seen)
        if paths not in shapes and len(shapes) >= SHAPES:
            return
        keys_of, verdicts = shapes.setdefault(paths, (itemgetter(*paths), {}))
        if len(verdicts) < KEPT:
            verdicts[keys_of(self._keys)] = verdict


class VerdictMemo:
    """Verdicts by context, rule and the values the rule read, over the nodes of one fleet; and one value for the
    parts of reports that nodes have alike."""

    def __init__(self) -> None:
        self._kept: Dict[Hashable, Tuple[Dict[str, Verdict], Dict[str, Verdicts]]] = {}
        self._alike: Dict[Hashable, Any] = {}
        self._texts: Dict[int, Tuple[Any, str]] = {}  # what nodes share (a fact group) made into a key once

    def node(self, facts: Facts, context: Hashable) -> Node:
        """A node to judge, with the verdicts kept for its context."""
        return Node(facts, self._kept.setdefault(context, ({}, {})), self._texts)

    def same(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """What `compute` gives, worked out for the first node only (the rule IDs a run knows, their names)."""
        if key not in self._alike:
            self._alike[key] = compute()
        return self._alike[key]

    def alike(self, items: T) -> T:
        """One tuple for every node's equal one, by the identity of what it holds: a report's findings, passed,
        unknown and not applicable rules; redacted and encoded once (gpudoctor.render.fleet)."""
        return self._alike.setdefault((tuple, *map(id, items)), items)
