"""How many worker processes a DataLoader starts, where the script says it: `num_workers=` as a literal or constant,
`int(opt.workers)` with an argparse default, a config dict's key, either branch of a conditional, or a `**kwargs`
dict."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Tuple

from gpudoctor.readers.python.constants import argument, const, dict_literal, subscript_key
from gpudoctor.readers.python.names import NO_VALUE, literal, segment
from gpudoctor.readers.python.scopes import Scope
from gpudoctor.readers.python.tree import Tree

Workers = Tuple[Optional[int], str]  # the number, and a note on where it comes from ("", None: unknown)


class LoaderWorkers:
    """Reads `num_workers` in one parsed script (`tree`, `lines`: its source)."""

    def __init__(self, tree: Tree, lines: List[str]):
        self.tree = tree
        self.lines = lines
        self._argparse: Optional[Dict[str, Tuple[int, str]]] = None

    def of(self, call: ast.Call, scope: Scope) -> Workers:
        """A DataLoader's num_workers where the script says it: a literal or constant, `int(opt.workers)` with an
        argparse default, a config dict, or a `**kwargs` dict (`{'num_workers': 1} if cuda else {}`: may start
        workers). (None, "") when unknown or absent."""
        node = argument(call, "num_workers", 5)
        if node is not None:
            return self.value(node, scope, 0)
        for keyword in call.keywords:
            if keyword.arg is None:
                for mapping, branch in self.kwargs_dicts(keyword.value, scope, 0):
                    for key, value in zip(mapping.keys, mapping.values):
                        if isinstance(key, ast.Constant) and key.value == "num_workers":
                            workers, note = self.value(value, scope, 0)
                            if isinstance(workers, int) and workers > 0:
                                where = f"from **{segment(self.lines, keyword.value, 30)}"
                                return workers, ", ".join(p for p in (note, where, branch) if p)
        return None, ""

    def value(self, node: ast.AST, scope: Scope, depth: int) -> Workers:
        if depth > 6:
            return None, ""
        value = const(node, scope)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, ""
        if isinstance(node, ast.Call):
            return self.cast(node, scope, depth)
        if isinstance(node, ast.Attribute):
            return self.option(node)
        if isinstance(node, ast.Subscript):
            return self.item(node, scope, depth)
        if isinstance(node, ast.IfExp):
            return self.either(node, scope, depth)
        return None, ""

    def cast(self, node: ast.Call, scope: Scope, depth: int) -> Workers:
        """`int(x)`: x's value."""
        if isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
            return self.value(node.args[0], scope, depth + 1)
        return None, ""

    def option(self, node: ast.Attribute) -> Workers:
        """`args.workers`: the option's argparse default."""
        if isinstance(node.value, ast.Name) and node.attr in self.argparse_defaults():
            option = self.argparse_defaults()[node.attr]
            return option[0], f"the default of {option[1]}"
        return None, ""

    def item(self, node: ast.Subscript, scope: Scope, depth: int) -> Workers:
        """`CONFIG["workers"]`: the value of the key in the dict literal CONFIG is."""
        for mapping, _ in self.kwargs_dicts(node.value, scope, depth + 1):
            key = subscript_key(node)
            for name, value_node in zip(mapping.keys, mapping.values):
                if isinstance(name, ast.Constant) and name.value == key:
                    return self.value(value_node, scope, depth + 1)
        return None, ""

    def either(self, node: ast.IfExp, scope: Scope, depth: int) -> Workers:
        """`a if cond else b`: the larger of the two known, said to be one branch's."""
        known: List[Tuple[int, str]] = []
        for branch in (node.body, node.orelse):
            workers, note = self.value(branch, scope, depth + 1)
            if isinstance(workers, int):
                known.append((workers, note))
        if known:
            workers, note = max(known, key=lambda b: b[0])
            return workers, ", ".join(p for p in (note, "in one branch of a conditional") if p)
        return None, ""

    def kwargs_dicts(self, node: ast.AST, scope: Scope, depth: int) -> List[Tuple[ast.Dict, str]]:
        """The dict literals an expression may be: a dict, a name bound to one, `CONFIG["loader"]`, either branch
        of `a if cond else b` (with a note saying so)."""
        if depth > 6:
            return []
        if isinstance(node, ast.IfExp):
            return [(mapping, "in one branch of a conditional") for branch in (node.body, node.orelse)
                    for mapping, _ in self.kwargs_dicts(branch, scope, depth + 1)]
        if isinstance(node, ast.Name):
            for level in scope.chain():
                if node.id in level.exprs:
                    if level.assigned.get(node.id, 0) == 1:
                        return self.kwargs_dicts(level.exprs[node.id], level, depth + 1)
                    return []
                if level.is_module and isinstance(level.constants.get(node.id), ast.Dict):
                    return [(level.constants[node.id], "")]
            return []
        if isinstance(node, ast.Subscript):
            key = subscript_key(node)
            for mapping, note in self.kwargs_dicts(node.value, scope, depth + 1):
                for name, value in zip(mapping.keys, mapping.values):
                    if isinstance(name, ast.Constant) and name.value == key:
                        return [(found, note) for found, _ in self.kwargs_dicts(value, scope, depth + 1)]
            return []
        literal_dict = dict_literal(node, scope)
        return [(literal_dict, "")] if literal_dict is not None else []

    def argparse_defaults(self) -> Dict[str, Tuple[int, str]]:
        """dest -> (integer default, option) of the script's `add_argument(..., default=N)` calls; a dest given two
        different defaults is left out."""
        if self._argparse is None:
            found: Dict[str, Tuple[int, str]] = {}
            clashes = set()
            for dest, default, shown in filter(None, map(integer_default, self.tree.walk())):
                if dest in found and found[dest][0] != default:
                    clashes.add(dest)
                found[dest] = (default, shown)
            self._argparse = {dest: value for dest, value in found.items() if dest not in clashes}
        return self._argparse


def integer_default(node: ast.AST) -> Optional[Tuple[str, int, str]]:
    """(dest, integer default, the option it is shown as) of an `add_argument(..., default=N)` call, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
        return None
    options = [literal(arg) for arg in node.args if isinstance(literal(arg), str)]
    given = argument(node, "dest", None)
    dest = literal(given) if given else NO_VALUE
    if not isinstance(dest, str):  # argparse's: the first long option, else the first option, without dashes
        first = next((o for o in options if o.startswith("--")), options[0] if options else "")
        dest = first.lstrip("-").replace("-", "_")
    given = argument(node, "default", None)
    default = literal(given) if given else NO_VALUE
    if isinstance(default, str) and default.isdigit():
        default = int(default)
    if not dest or not isinstance(default, int) or isinstance(default, bool):
        return None
    return dest, default, next((o for o in options if o.startswith("--")), dest)
