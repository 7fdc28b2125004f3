"""The literal values a script's expressions have where they can be known without running it: literals, names
assigned once, parameter defaults and the values a caller passes, integer arithmetic, dict literals, a call's
arguments."""

from __future__ import annotations

import ast
import operator
from typing import Any, Dict, List, Optional

from gpudoctor.readers.python.names import NO_VALUE, has_value, literal
from gpudoctor.readers.python.scopes import Func, Scope

# The integer arithmetic a constant may be made of (a product of factors under a million, a quotient by non-zero).
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub,
              ast.Mult: lambda left, right: left * right if abs(left) < 1e6 and abs(right) < 1e6 else NO_VALUE,
              ast.FloorDiv: lambda left, right: left // right if right else NO_VALUE}


def const(node: Optional[ast.AST], scope: Scope, depth: int = 0) -> Any:
    """The literal value of an expression where it can be known (literals, constants, parameter defaults)."""
    if node is None or depth > 8:
        return NO_VALUE
    value = literal(node)
    if has_value(value):
        return value
    if isinstance(node, ast.Name):
        return _const_name(node, scope, depth)
    if isinstance(node, ast.BinOp):
        return _const_arithmetic(node, scope, depth)
    return NO_VALUE


def _const_name(node: ast.Name, scope: Scope, depth: int) -> Any:
    for level in scope.chain():
        if node.id in level.bindings:
            return level.bindings[node.id]
        if node.id in level.exprs:
            if level.assigned.get(node.id, 0) == 1:
                return const(level.exprs[node.id], level, depth + 1)
            return NO_VALUE
        if node.id in level.params:
            return const(level.params[node.id], level.parent or level, depth + 1)
        if level.is_module and node.id in level.constants:
            found = level.constants[node.id]
            return found if not isinstance(found, ast.AST) else NO_VALUE
    return NO_VALUE


def _const_arithmetic(node: ast.BinOp, scope: Scope, depth: int) -> Any:
    """`+`, `*` (of factors under a million), `-` and `//` (by a non-zero) of two known integers."""
    operation = ARITHMETIC.get(type(node.op))
    if operation is None:
        return NO_VALUE
    left, right = const(node.left, scope, depth + 1), const(node.right, scope, depth + 1)
    if isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool):
        try:
            return operation(left, right)
        except (OverflowError, ZeroDivisionError):
            return NO_VALUE
    return NO_VALUE


def module_constants(body: List[ast.stmt]) -> Dict[str, Any]:
    """Names assigned exactly one literal value at module level (`NUM_WORKERS = 4`; a dict literal is kept as its
    node)."""
    values: Dict[str, Any] = {}
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            stack.extend(getattr(node, "body", []) + getattr(node, "orelse", []) + getattr(node, "finalbody", []))
            for handler in getattr(node, "handlers", []) or []:
                stack.extend(handler.body)
            continue
        targets: List[ast.expr] = []
        value: Optional[ast.expr] = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        elif isinstance(node, ast.AugAssign):
            targets, value = [node.target], None
        for target in targets:
            if isinstance(target, ast.Name):
                new = literal(value) if value is not None else NO_VALUE
                if isinstance(value, ast.Dict):
                    new = value
                old = values.get(target.id, new)
                values[target.id] = new if (old is new or (has_value(old) and old == new)) else NO_VALUE
    return values


def dict_literal(node: Optional[ast.AST], scope: Scope) -> Optional[ast.Dict]:
    """The dict literal an expression is: `{…}`, `dict(a=…)`, or a name bound to one."""
    if isinstance(node, ast.Dict):
        return node
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return ast.Dict(keys=[ast.Constant(kw.arg) for kw in node.keywords if kw.arg],
                        values=[kw.value for kw in node.keywords if kw.arg])
    if isinstance(node, ast.Name):
        for level in scope.chain():
            if node.id in level.exprs:
                bound = level.exprs[node.id]
                return bound if isinstance(bound, ast.Dict) else None
            if level.is_module:
                constant = level.constants.get(node.id)
                return constant if isinstance(constant, ast.Dict) else None
    return None


def subscript_key(node: ast.Subscript) -> Any:
    """The literal key of `x["key"]`."""
    return literal(node.slice)


def argument(call: ast.Call, name: str, position: Optional[int]) -> Optional[ast.expr]:
    """The expression a call passes as keyword `name`, or at `position` (not behind a `*args`)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and len(call.args) > position and not any(
            isinstance(arg, ast.Starred) for arg in call.args[:position + 1]):
        return call.args[position]
    return None


def passed(func: Func, call: ast.Call, param: str) -> Optional[ast.expr]:
    """The expression `call` passes for `func`'s parameter `param` (None where it cannot be told)."""
    names = func.parameters()
    return argument(call, param, names.index(param) if param in names else None)


def call_bindings(func: Func, call: ast.Call, scope: Scope) -> Dict[str, Any]:
    """Parameter values a call passes, where they are literals (else the parameter's default applies)."""
    bound: Dict[str, Any] = {}
    for name, value in zip(func.parameters(), call.args):
        found = const(value, scope)
        if has_value(found):
            bound[name] = found
    for kw in call.keywords:
        if kw.arg:
            found = const(kw.value, scope)
            if has_value(found):
                bound[kw.arg] = found
    return bound
