"""A parsed Python file walked once: every node in the order a depth-first walk meets it, with its depth and the
end of its subtree. Every question the Python reader asks of the file is answered from that one walk: the nodes in
`ast.walk`'s order (`walk`), a scope's nodes children first (`postorder`), a walk that leaves out some subtrees
(`preorder`), and an enter/leave visit for the readers that keep context (`visit`). Iterative, so nesting costs no
stack."""

from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional

SCOPES = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)  # bodies that do not run where written


class Tree:
    def __init__(self, module: ast.AST):
        self.module = module
        self.body: List[ast.stmt] = getattr(module, "body", None) or []
        self.nodes: List[ast.AST] = []  # depth-first, parents before children, left to right
        self.depths: List[int] = []
        self.positions: Dict[int, int] = {}
        stack = [(module, 0)]
        while stack:
            node, depth = stack.pop()
            self.positions.setdefault(id(node), len(self.nodes))  # Load/Store and operators are shared
            self.nodes.append(node)
            self.depths.append(depth)
            stack.extend((child, depth + 1) for child in reversed(list(ast.iter_child_nodes(node))))
        self.ends = [len(self.nodes)] * len(self.nodes)  # the position after each node's subtree
        open_: List[int] = []
        for position, depth in enumerate(self.depths):
            while open_ and self.depths[open_[-1]] >= depth:
                self.ends[open_.pop()] = position
            open_.append(position)
        self._breadth_first: Optional[List[ast.AST]] = None

    def _span(self, node: Optional[ast.AST]) -> Optional[range]:
        """The positions of `node`'s subtree (the module's when None); None for a node of no file (made by a reader)."""
        start = 0 if node is None else self.positions.get(id(node))
        if start is None or node is not None and self.nodes[start] is not node:
            return None
        return range(start, self.ends[start])

    def walk(self, node: Optional[ast.AST] = None) -> List[ast.AST]:
        """What `ast.walk(node)` gives, in its order (breadth first; the module's nodes when `node` is None). Within a
        level, depth-first order is breadth-first order, so a stable sort by depth gives it."""
        span = self._span(node)
        if span is None:  # a node of no file: `_span` places the module (None) always
            return list(ast.walk(node)) if node is not None else []
        if span.start == 0 and self._breadth_first is not None:
            return self._breadth_first
        found = [self.nodes[i] for i in sorted(span, key=self.depths.__getitem__)]
        if span.start == 0:
            self._breadth_first = found
        return found

    def preorder(self, skip: Callable[[ast.AST], bool]) -> List[ast.AST]:
        """The module's nodes depth first, leaving out each node for which `skip` is true and everything under it."""
        found, position = [], 0
        while position < len(self.nodes):
            node = self.nodes[position]
            if skip(node):
                position = self.ends[position]
                continue
            found.append(node)
            position += 1
        return found

    def postorder(self, root: ast.AST, skip_scopes: bool = True) -> List[ast.AST]:
        """Every node under `root` (root included), children before parents, left to right; never the lambda,
        function or class bodies under it when `skip_scopes` (they do not run where they are written)."""
        span = self._span(root)
        if span is None:
            return Tree(root).postorder(root, skip_scopes)
        found: List[ast.AST] = []
        open_: List[int] = []
        position = span.start
        while position < span.stop:
            if skip_scopes and position != span.start and isinstance(self.nodes[position], SCOPES):
                position = self.ends[position]
                continue
            while open_ and self.depths[open_[-1]] >= self.depths[position]:
                found.append(self.nodes[open_.pop()])
            open_.append(position)
            position += 1
        found.extend(self.nodes[i] for i in reversed(open_))
        return found

    def visit(self, visitor) -> None:
        """Hand every node of the module to `visitor.enter(node)`, then, once its subtree is done, `visitor.leave`."""
        open_: List[int] = []
        for position, node in enumerate(self.nodes):
            while open_ and self.depths[open_[-1]] >= self.depths[position]:
                visitor.leave(self.nodes[open_.pop()])
            visitor.enter(node)
            open_.append(position)
        for position in reversed(open_):
            visitor.leave(self.nodes[position])
