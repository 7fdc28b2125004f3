"""Names in a script: imports and aliases, dotted names, constants, `__main__` guards, source snippets.

Everything here is iterative or depth-bounded: scripts may nest deeply and must never raise RecursionError.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional

from gpudoctor.redact import cut

MAX_DEPTH = 40
_NO_VALUE = object()

# Modules that re-export another's API under a different name.
CANONICAL_PREFIXES = (
    ("torch.multiprocessing.spawn.", "torch.multiprocessing."),
    ("multiprocessing.context.", "multiprocessing."),
    ("multiprocessing.pool.Pool", "multiprocessing.Pool"),
    ("torch.multiprocessing.Process", "multiprocessing.Process"),
    ("torch.multiprocessing.Pool", "multiprocessing.Pool"),
    ("torch.multiprocessing.Manager", "multiprocessing.Manager"),
    ("torch.multiprocessing.get_context", "multiprocessing.get_context"),
    ("torch.multiprocessing.set_start_method", "multiprocessing.set_start_method"),
    ("concurrent.futures.process.", "concurrent.futures."),
    ("torch.utils.data.dataloader.DataLoader", "torch.utils.data.DataLoader"),
    ("pytorch_lightning.trainer.trainer.Trainer", "lightning.Trainer"),
    ("pytorch_lightning.trainer.Trainer", "lightning.Trainer"),
    ("pytorch_lightning.Trainer", "lightning.Trainer"),
    ("lightning.pytorch.trainer.trainer.Trainer", "lightning.Trainer"),
    ("lightning.pytorch.trainer.Trainer", "lightning.Trainer"),
    ("lightning.pytorch.Trainer", "lightning.Trainer"),
    ("lightning.fabric.Fabric", "lightning.Fabric"),
    ("torch.distributed.launcher.api.", "torch.distributed.launcher."),
)


def canonical(name: Optional[str]) -> Optional[str]:
    """One spelling for names that several modules export (`torch.multiprocessing.Process` →
    `multiprocessing.Process`)."""
    if not name:
        return name
    for prefix, replacement in CANONICAL_PREFIXES:
        if prefix.endswith("."):
            if name.startswith(prefix):
                return replacement + name[len(prefix):]
        elif name == prefix or name.startswith(prefix + "."):
            return replacement + name[len(prefix):]
    return name


def imports_of(statements: List[ast.stmt], aliases: Dict[str, str]) -> None:
    """Add the aliases bound by the import statements of a block (not descending into functions)."""
    stack = list(reversed(statements))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: a sibling module of the script's package
                base = "." * node.level + (node.module or "")
            else:
                base = node.module or ""
            for alias in node.names:
                if alias.name == "*":
                    aliases.setdefault("*", "")
                    aliases["*"] = (aliases["*"] + " " + base).strip()
                    continue
                aliases[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)) or type(node).__name__ == "TryStar":
            for field in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(node, field, []) or []))
            for handler in getattr(node, "handlers", []) or []:
                stack.extend(reversed(handler.body))


def dotted(node: ast.AST) -> Optional[str]:
    """`a.b.c` for a chain of attributes on a name, else None."""
    parts = []
    depth = 0
    while isinstance(node, ast.Attribute) and depth < MAX_DEPTH:
        parts.append(node.attr)
        node = node.value
        depth += 1
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def module_aliases(tree) -> Dict[str, str]:
    """The aliases bound by every import statement of a module (a `Tree`), functions included (`import os as o`:
    o → os)."""
    aliases: Dict[str, str] = {}
    for node in tree.walk():
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports_of([node], aliases)
    return aliases


def qualified_name(node: ast.AST, aliases: Dict[str, str]) -> str:
    """The imported dotted name an expression refers to through a module's import aliases (`DDP` →
    `torch.nn.parallel.DistributedDataParallel`); the dotted text itself when its root is not imported."""
    name = dotted(node) or ""
    root, _, rest = name.partition(".")
    if root in aliases:
        return canonical(f"{aliases[root]}.{rest}" if rest else aliases[root]) or ""
    return name


def attribute_path(node: ast.AST) -> Optional[tuple]:
    """(root name, "a.b") for `root.a.b`, else None."""
    name = dotted(node)
    if not name or "." not in name:
        return None
    root, _, rest = name.partition(".")
    return root, rest


def literal(node: Optional[ast.AST]) -> Any:
    """The value of a literal (constants, unary minus, tuples/lists of literals); _NO_VALUE otherwise."""
    if node is None:
        return _NO_VALUE
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = literal(node.operand)
        if isinstance(inner, (int, float)) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) < 64:
        values = [literal(elt) for elt in node.elts]
        if all(value is not _NO_VALUE for value in values):
            return tuple(values)
    return _NO_VALUE


def has_value(value: Any) -> bool:
    return value is not _NO_VALUE


NO_VALUE = _NO_VALUE


def is_main_guard(test: ast.AST) -> Optional[bool]:
    """True for `__name__ == "__main__"` (either side, any quotes, also inside `and`), False for `!=`, else None."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            if is_main_guard(value) is True:
                return True
        return None
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = is_main_guard(test.operand)
        return None if inner is None else not inner
    if not isinstance(test, ast.Compare) or len(test.ops) != 1:
        return None
    left, right = test.left, test.comparators[0]
    sides = {_guard_side(left), _guard_side(right)}
    op = test.ops[0]
    if sides == {"name", "main"}:
        if isinstance(op, (ast.Eq, ast.Is)):
            return True
        if isinstance(op, (ast.NotEq, ast.IsNot)):
            return False
    if _guard_side(left) == "name" and isinstance(op, ast.In):
        values = literal(right)
        if isinstance(values, tuple) and "__main__" in values:
            return True
    return None


def _guard_side(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name) and node.id == "__name__":
        return "name"
    if isinstance(node, ast.Constant) and node.value == "__main__":
        return "main"
    return None


def segment(lines: List[str], node: ast.AST, limit: int = 80) -> str:
    """The source text of `node`, on one line, shortened to `limit` characters ("…" for a node of no position)."""
    if not isinstance(node, (ast.expr, ast.stmt, ast.keyword, ast.arg, ast.excepthandler)):
        return "…"
    try:
        start, end = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        if start == end:
            text = lines[start][node.col_offset:node.end_col_offset]
        else:
            first = lines[start][node.col_offset:]
            rest = [line.strip() for line in lines[start + 1:min(end, start + 6)]]
            last = lines[end][:node.end_col_offset].strip() if end - start < 6 else "…"
            text = " ".join([first.strip()] + rest + [last])
    except (AttributeError, IndexError, TypeError):
        return "…"
    return cut(" ".join(text.split()), limit, "…")
