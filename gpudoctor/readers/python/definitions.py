"""The functions and classes a block of the script defines (also inside its if/try/with), bound in its scope before
the block is walked, and the functions a decorator registers (`@app.command()`: calling `app()` runs them)."""

from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional

from gpudoctor.readers.python.names import dotted
from gpudoctor.readers.python.scopes import Func, FunctionNode, Klass, Resolved, Scope


def collect_definitions(body: List[ast.stmt], scope: Scope, cls: Optional[Klass], registry: Dict[str, List[Func]],
                        resolve: Callable[[ast.AST, Scope], Resolved], prefix: str = "") -> None:
    """Bind the functions and classes defined in `body` (a class's methods when `cls`); `resolve` names the bases
    of the classes."""
    stack = list(reversed(body))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = Func(prefix + node.name, node, scope, cls)
            if cls is not None:
                cls.methods.setdefault(node.name, func)
            else:
                scope.functions[node.name] = func
                _register(func, node, registry)
        elif isinstance(node, ast.ClassDef) and cls is None:
            klass = Klass(prefix + node.name, node)
            scope.classes[node.name] = klass
            collect_definitions(node.body, scope, klass, registry, resolve, prefix=klass.name + ".")
        elif isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
            for name in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(node, name, []) or []))
            for handler in getattr(node, "handlers", []) or []:
                stack.extend(reversed(handler.body))
    for klass in list(scope.classes.values()):
        if not klass.bases:
            for base in klass.node.bases:
                klass.bases.append(resolve(base, scope))


def _register(func: Func, node: FunctionNode, registry: Dict[str, List[Func]]) -> None:
    """`@app.command()` or `@cli.register`: `func` under the decorator's root name (`app`)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        root = dotted(target)
        if root and "." in root:
            registry.setdefault(root.split(".")[0], []).append(func)
