"""What names hold while a script is walked: the script's own functions (`Func`) and classes (`Klass`), the abstract
values the rules care about (`Val`), the scopes that bind them in statement order (`Scope`), and the imported
dotted name an expression refers to (`qualified`)."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Protocol, Tuple, Union

from gpudoctor.readers.python.events import Event
from gpudoctor.readers.python.known_calls import BUILTIN_NAMES, PROCESS_CLASSES
from gpudoctor.readers.python.names import canonical, dotted

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
MAX_CALL_DEPTH = 30  # calls entered within calls before the walk stops (and says it was truncated)


@dataclass
class Val:
    """An abstract value: what a name holds, as far as the rules care."""

    kind: str
    data: Dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Func:
    name: str
    node: FunctionNode
    parent: Scope
    cls: Optional[Klass] = None
    scope: Optional[Scope] = None  # after walking
    events: Optional[List[Event]] = None
    returns: List[ast.expr] = field(default_factory=list)

    def parameters(self) -> List[str]:
        """The names a call's positional arguments bind, in order (`self` or `cls` left out for a method)."""
        args = self.node.args
        names = [a.arg for a in list(args.posonlyargs) + list(args.args)]
        return names[1:] if self.cls is not None and names else names


# What a name or an attribute refers to: one of the script's functions or classes, an imported name, or unknown.
Resolved = Union[Func, "Klass", str, None]


@dataclass(eq=False)
class Klass:
    name: str
    node: ast.ClassDef
    methods: Dict[str, Func] = field(default_factory=dict)
    bases: List[Resolved] = field(default_factory=list)
    attrs: Dict[str, Val] = field(default_factory=dict)

    def method(self, name: str, depth: int = 0) -> Optional[Func]:
        if name in self.methods:
            return self.methods[name]
        if depth < 10:
            for base in self.bases:
                if isinstance(base, Klass):
                    found = base.method(name, depth + 1)
                    if found:
                        return found
        return None

    def is_process(self, depth: int = 0) -> bool:
        for base in self.bases:
            if isinstance(base, str) and canonical(base) in PROCESS_CLASSES:
                return True
            if isinstance(base, Klass) and depth < 10 and base.is_process(depth + 1):
                return True
        return False


class Scope:
    """Names bound in a module or function body, filled in statement order while it is walked."""

    def __init__(self, parent: Optional[Scope], func: Optional[Func] = None):
        self.parent = parent
        self.func = func
        self.aliases: Dict[str, str] = {}
        self.functions: Dict[str, Func] = {}
        self.classes: Dict[str, Klass] = {}
        self.values: Dict[str, Val] = {}
        self.exprs: Dict[str, ast.expr] = {}
        self.assigned: Dict[str, int] = {}
        self.attrs: Dict[Tuple[str, str], Tuple[Optional[ast.expr], int]] = {}
        self.loopkeys: Dict[str, set] = {}
        self.params: Dict[str, Optional[ast.expr]] = {}
        self.bindings: Dict[str, Any] = {}  # parameter values known from a caller (recipe analysis)
        self.constants: Dict[str, Any] = {}  # module scope: names assigned one literal value

    @property
    def is_module(self) -> bool:
        return self.parent is None

    def chain(self) -> Iterator[Scope]:
        scope: Optional[Scope] = self
        while scope is not None:
            yield scope
            scope = scope.parent

    def lookup(self, table: str, name: str) -> Any:
        for scope in self.chain():
            found = getattr(scope, table).get(name)
            if found is not None:
                return found
        return None

    def bound_here(self, name: str) -> bool:
        return (name in self.values or name in self.exprs or name in self.functions or name in self.classes
                or name in self.aliases or name in self.params)

    @property
    def klass(self) -> Optional[Klass]:
        for scope in self.chain():
            if scope.func is not None and scope.func.cls is not None:
                return scope.func.cls
        return None


class Summaries(Protocol):
    """The walk as the value and recipe readers see it: a function's events (walking it once, on first use) and
    how deep the walk is in calls."""

    depth: int

    def summary(self, func: Func) -> List[Event]: ...


def qualified(node: ast.AST, scope: Scope) -> Optional[str]:
    """The imported dotted name an expression refers to (`mp.spawn` → `torch.multiprocessing.spawn`)."""
    name = dotted(node)
    if not name:
        return None
    root, _, rest = name.partition(".")
    for level in scope.chain():
        if root in level.aliases:
            base = level.aliases[root]
            return canonical(f"{base}.{rest}" if rest else base)
        if level.bound_here(root):
            return None
    if root in ("os",):
        return canonical(name)
    if not rest and root in BUILTIN_NAMES:
        return root
    return None
