"""Calls of `torch.distributed.broadcast_object_list` (object_list, src) whose result cannot arrive. torch
serialises the src rank's list and writes what it receives into every other rank's list in place
(`object_list[i] = …`), after broadcasting the sizes of as many objects as each rank's list holds; so every rank must
pass a list of the same length, and the caller must keep that list to read the result:

- `temporary`: the list is written in the call around a value that differs between ranks
  (`cfg = load() if rank == 0 else None`, then the broadcast of `[cfg]` from rank 0): the other ranks receive into a
  list nothing keeps, and `cfg` stays None on them. A call that only the src rank makes (under `if rank == 0:`), or
  whose values do not depend on the rank (a sender's helper), is not judged;
- `sizes`: the list passed is built with another length on some ranks (`objs = [cfg] if rank == 0 else []`, an
  `append` under `if rank == 0:`): the size broadcast does not match (gloo aborts "Received data size doesn't match
  expected size"; NCCL may hang or hand back garbage).

Found statically in each function (and the module body) on its own; the script is never run."""

from __future__ import annotations

import ast
import re
from typing import Dict, Iterator, List, Optional, Tuple

from gpudoctor.readers.python.names import literal, qualified_name, segment
from gpudoctor.readers.python.tree import Tree

BROADCAST = {"torch.distributed.broadcast_object_list", "torch.distributed.distributed_c10d.broadcast_object_list"}
# a test that differs between ranks: it names a rank or the main process (`rank == 0`, `dist.get_rank() == 0`,
# `accelerator.is_main_process`, `args.local_rank in (-1, 0)`, `trainer.is_world_process_zero()`)
RANKISH = re.compile(r"rank|is_main_process|is_master|master_process|process_zero|main_proc", re.IGNORECASE)
GROWS = ("append", "extend", "insert")


def _rankish(test: ast.AST) -> bool:
    return any(RANKISH.search(text) for text in _words(test))


def _words(node: ast.AST) -> Iterator[str]:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            yield sub.id
        elif isinstance(sub, ast.Attribute):
            yield sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.value


def _length(node: Optional[ast.AST]) -> Optional[int]:
    """The length of a list written out (`[a, b]`, `[]`, `[None] * 3`), None when it is not written out (and -1 for
    `None`, which is no list at all)."""
    if isinstance(node, (ast.List, ast.Tuple)) and not any(isinstance(e, ast.Starred) for e in node.elts):
        return len(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and isinstance(node.left, ast.List):
        times = literal(node.right)
        return len(node.left.elts) * times if isinstance(times, int) and not isinstance(times, bool) else None
    if isinstance(node, ast.Constant) and node.value is None:
        return -1
    return None


class _Scope:
    """What one function (or the module body) does to each name before a line: the lengths of the lists it is
    given, and whether it grows under a test that differs between ranks."""

    def __init__(self, body: List[ast.stmt]):
        self.events: Dict[str, List[Tuple[int, str, Optional[int], bool, ast.AST]]] = {}
        self.under_rank: Dict[int, bool] = {}  # line of each statement → run only under a rank test
        self.statements(body, False)

    def statements(self, body: List[ast.stmt], under_rank: bool) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            self.under_rank[statement.lineno] = under_rank
            self.record(statement, under_rank)
            if isinstance(statement, ast.If):
                inner = under_rank or _rankish(statement.test)
                self.statements(statement.body, inner)
                self.statements(statement.orelse, inner)
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                nested = getattr(statement, field, None)
                if isinstance(nested, list):
                    self.statements([s for s in nested if isinstance(s, ast.stmt)] +
                                    [s for h in nested if isinstance(h, ast.ExceptHandler) for s in h.body],
                                    under_rank)

    def add(self, name: str, line: int, kind: str, length: Optional[int], under_rank: bool, node: ast.AST) -> None:
        self.events.setdefault(name, []).append((line, kind, length, under_rank, node))

    def record(self, statement: ast.stmt, under_rank: bool) -> None:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 \
                and isinstance(statement.targets[0], ast.Name):
            value, name = statement.value, statement.targets[0].id
            if isinstance(value, ast.IfExp):
                lengths = {_length(value.body), _length(value.orelse)}
                varies = _rankish(value.test) and None not in lengths and len(lengths) > 1
                self.add(name, statement.lineno, "varies" if varies else "assign", None,
                         under_rank or _rankish(value.test), statement)
            else:
                self.add(name, statement.lineno, "assign", _length(value), under_rank, statement)
        elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
            self.add(statement.target.id, statement.lineno, "grows", None, under_rank, statement)
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            func = statement.value.func
            if isinstance(func, ast.Attribute) and func.attr in GROWS and isinstance(func.value, ast.Name):
                self.add(func.value.id, statement.lineno, "grows", None, under_rank, statement)

    def rank_dependent(self, name: str, line: int) -> bool:
        """Whether `name` is given a value only on some ranks, or one chosen by the rank, before `line`."""
        return any(under_rank for event_line, kind, _, under_rank, _ in self.events.get(name, [])
                   if event_line < line and kind in ("assign", "varies"))

    def uneven(self, name: str, line: int) -> Optional[ast.AST]:
        """The statement that makes `name`'s list another length on some ranks before `line`, or None."""
        before = [event for event in self.events.get(name, []) if event[0] < line]
        for _, kind, _, under_rank, node in before:
            if kind == "varies" or (kind == "grows" and under_rank):
                return node
        lengths = {length for _, kind, length, _, _ in before if kind == "assign"}
        assigned_under_rank = [node for _, kind, length, under_rank, node in before
                               if kind == "assign" and length is not None and under_rank]
        if None not in lengths and len(lengths) > 1 and assigned_under_rank:
            return assigned_under_rank[0]
        return None


def object_broadcasts(tree: Tree, lines: List[str], aliases: Dict[str, str]) -> List[dict]:
    """Every broadcast_object_list call whose result cannot arrive on the other ranks (see the module docstring):
    `{"line", "what", "problem": "temporary"|"sizes", "list_line", "list_what"}`."""
    found: List[dict] = []
    scopes = [tree.module] + [node for node in tree.walk() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for scope in scopes:
        body = getattr(scope, "body", [])
        calls = [node for node in tree.postorder(scope) if isinstance(node, ast.Call)
                 and qualified_name(node.func, aliases) in BROADCAST]
        if not calls:
            continue
        known = _Scope(body)
        for call in calls:
            entry = _judge(call, known, lines)
            if entry:
                found.append(entry)
    return sorted(found, key=lambda e: e["line"])


def _judge(call: ast.Call, scope: _Scope, lines: List[str]) -> Optional[dict]:
    if scope.under_rank.get(call.lineno):
        return None  # only some ranks make this call: a sender's (or a receiver's) own branch
    given = call.args[0] if call.args else next((kw.value for kw in call.keywords if kw.arg == "object_list"), None)
    entry = {"line": call.lineno, "what": segment(lines, call, 80)}
    if isinstance(given, (ast.List, ast.Tuple)):
        received = [e for e in given.elts if (isinstance(e, ast.IfExp) and _rankish(e.test))
                    or (isinstance(e, ast.Name) and scope.rank_dependent(e.id, call.lineno))]
        if received:
            return dict(entry, problem="temporary", list_line=given.lineno, list_what=segment(lines, given, 40))
    if isinstance(given, ast.Name):
        node = scope.uneven(given.id, call.lineno)
        if node is not None:
            return dict(entry, problem="sizes", list_line=getattr(node, "lineno", call.lineno),
                        list_what=segment(lines, node, 60))
    return None
