"""What a training script does when it is run, found statically: the script is parsed, never imported or run.

The walker follows the module's statements in order, enters the functions (and methods) they call in the same
file, and records events with the call path that led to them:

- `start`: something that starts processes (spawn/forkserver children re-import the script), with its method;
- `cuda`: a statement that may initialise CUDA (`torch.cuda.*`, `.cuda()`, `.to("cuda")`, `device="cuda"`);
- `cvd`: an assignment of `CUDA_VISIBLE_DEVICES` in `os.environ`;
- `method`: `multiprocessing.set_start_method(...)`;
- `nemo`: a nemo_run `run.run(...)` call, with what the recipe says about devices.

Each function is walked once; its events are replayed (with the caller's frame prepended) wherever it is called.
Code in functions that are never called from module level produces nothing.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from gpudoctor.readers.env import CVD
from gpudoctor.readers.python.names import (
    NO_VALUE,
    attribute_path,
    canonical,
    dotted,
    has_value,
    imports_of,
    is_main_guard,
    literal,
    segment,
)
from gpudoctor.readers.python.tree import Tree

MAX_SUMMARY_EVENTS = 400
MAX_EVENTS = 5000
MAX_CALL_DEPTH = 30

# Calls that start worker processes as soon as they are made.
STARTERS = {
    "torch.multiprocessing.spawn": "spawn",
    "torch.multiprocessing.start_processes": "spawn",
    "multiprocessing.Pool": "default",
    "multiprocessing.Manager": "default",
    "concurrent.futures.ProcessPoolExecutor": "default",
    "torch.distributed.launcher.elastic_launch": "spawn",
    "nemo_run.run": "spawn",
    "nemo_run.Experiment": "spawn",
    "nemo_run.cli.main": "spawn",
}
PROCESS_CLASSES = {"multiprocessing.Process"}
DATALOADERS = {"torch.utils.data.DataLoader", "torch_geometric.loader.DataLoader", "monai.data.DataLoader"}
LIGHTNING_TRAINERS = {"lightning.Trainer"}
LIGHTNING_RUNS = {"fit", "validate", "test", "predict", "tune"}
HF_RUNS = {"train", "evaluate", "predict"}
# Functions that call the function they are given (a CLI wrapper around `main`).
CALLS_ITS_ARGUMENT = {"fire.Fire", "typer.run", "tyro.cli", "absl.app.run", "jsonargparse.CLI", "jsonargparse.auto_cli",
                      "defopt.run", "plac.call", "tensorflow.compat.v1.app.run"}
# Builtins that iterate their argument right away.
CONSUMERS = {"list", "tuple", "next", "sorted", "set", "sum", "any", "all", "dict", "iter", "max", "min"}
# Calls that wrap an iterable: iterating them iterates their arguments.
WRAPPERS = {"enumerate", "zip", "iter", "tqdm", "islice", "chain", "cycle", "tqdm.tqdm", "tqdm.auto.tqdm",
            "itertools.islice", "itertools.chain", "itertools.cycle", "rich.progress.track", "track"}
# torch.cuda functions that do not initialise CUDA.
CUDA_LAZY = {"manual_seed", "manual_seed_all", "is_initialized", "seed", "seed_all", "set_rng_state",
             "set_rng_state_all", "_lazy_call", "is_built"}
CUDA_LAZY_PREFIXES = ("torch.cuda.amp.", "torch.cuda.nvtx.")
SPAWN_METHODS = ("spawn", "forkserver")
# The integer arithmetic a constant may be made of (a product of factors under a million, a quotient by non-zero).
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub,
              ast.Mult: lambda left, right: left * right if abs(left) < 1e6 and abs(right) < 1e6 else NO_VALUE,
              ast.FloorDiv: lambda left, right: left // right if right else NO_VALUE}


@dataclass
class Event:
    kind: str
    line: int
    column: int
    path: Tuple[str, ...]
    data: Dict[str, Any] = field(default_factory=dict)
    guarded: bool = False

    def relocated(self, frame: str, line: int, guarded: bool) -> Event:
        return Event(self.kind, self.line, self.column, (f"{frame}:{line}",) + self.path, self.data,
                     self.guarded or guarded)


class EventList(list):
    """Events of one walk, each site once (a CUDA_VISIBLE_DEVICES assignment again once CUDA has been initialised),
    and only the first CUDA initialisation: ordering needs no more, and summaries stay small."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit = limit
        self.seen: set = set()
        self.cuda_seen = False

    def add(self, event: Event) -> bool:
        if event.kind == "cuda":
            if self.cuda_seen:
                return True
        key = (event.kind, event.line, event.column, event.data.get("call"), event.guarded,
               self.cuda_seen if event.kind == "cvd" else None)
        if key in self.seen:
            return True
        if len(self) >= self.limit:
            return False
        self.seen.add(key)
        self.append(event)
        if event.kind == "cuda":
            self.cuda_seen = True
        return True


@dataclass
class Val:
    """An abstract value: what a name holds, as far as the rules care."""

    kind: str
    data: Dict[str, Any] = field(default_factory=dict)


@dataclass(eq=False)
class Func:
    name: str
    node: ast.AST
    parent: Scope
    cls: Optional[Klass] = None
    scope: Optional[Scope] = None  # after walking
    events: Optional[List[Event]] = None
    returns: List[ast.AST] = field(default_factory=list)


@dataclass(eq=False)
class Klass:
    name: str
    node: ast.ClassDef
    methods: Dict[str, Func] = field(default_factory=dict)
    bases: List[Any] = field(default_factory=list)
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
        self.exprs: Dict[str, ast.AST] = {}
        self.assigned: Dict[str, int] = {}
        self.attrs: Dict[Tuple[str, str], Tuple[ast.AST, int]] = {}
        self.loopkeys: Dict[str, set] = {}
        self.params: Dict[str, Optional[ast.AST]] = {}
        self.bindings: Dict[str, Any] = {}  # parameter values known from a caller (recipe analysis)
        self.constants: Dict[str, Any] = {}  # module scope: names assigned one literal value

    def chain(self):
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


class Walker:
    """Walks one parsed script. `run()` returns the module-level event trace."""

    def __init__(self, tree: Tree, lines: List[str]):
        self.index = tree  # the file's one walk
        self.tree = tree.module
        self.lines = lines
        self.module = Scope(None)
        self.depth = 0
        self.registry: Dict[str, List[Func]] = {}  # decorator root name -> functions it registers
        self.truncated = False

    # ----- set-up ---------------------------------------------------------------------------------------------
    def run(self) -> List[Event]:
        imports_of(self.tree.body, self.module.aliases)
        self.collect_definitions(self.tree.body, self.module, None)
        self.module.constants = self.module_constants()
        events = EventList(MAX_EVENTS)
        self.walk_block(self.tree.body, self.module, "<module>", False, events)
        return list(events)

    def module_constants(self) -> Dict[str, Any]:
        """Names assigned exactly one literal value at module level (`NUM_WORKERS = 4`)."""
        values: Dict[str, Any] = {}
        stack = list(self.tree.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                stack.extend(getattr(node, "body", []) + getattr(node, "orelse", []) + getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []) or []:
                    stack.extend(handler.body)
                continue
            targets: List[ast.AST] = []
            value = None
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

    def collect_definitions(self, body: List[ast.stmt], scope: Scope, cls: Optional[Klass],
                            prefix: str = "") -> None:
        """Functions and classes defined in a block (also inside if/try at that level)."""
        stack = list(reversed(body))
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                func = Func(prefix + node.name, node, scope, cls)
                if cls is not None:
                    cls.methods.setdefault(node.name, func)
                else:
                    scope.functions[node.name] = func
                    for decorator in node.decorator_list:
                        target = decorator.func if isinstance(decorator, ast.Call) else decorator
                        root = dotted(target)
                        if root and "." in root:
                            self.registry.setdefault(root.split(".")[0], []).append(func)
            elif isinstance(node, ast.ClassDef) and cls is None:
                klass = Klass(prefix + node.name, node)
                scope.classes[node.name] = klass
                self.collect_definitions(node.body, scope, klass, prefix=klass.name + ".")
            elif isinstance(node, (ast.If, ast.Try, ast.With)) or type(node).__name__ == "TryStar":
                for name in ("body", "orelse", "finalbody"):
                    stack.extend(reversed(getattr(node, name, []) or []))
                for handler in getattr(node, "handlers", []) or []:
                    stack.extend(reversed(handler.body))
        for klass in list(scope.classes.values()):
            if not klass.bases:
                for base in klass.node.bases:
                    klass.bases.append(self.resolve(base, scope))

    # ----- name resolution ------------------------------------------------------------------------------------
    def qualified(self, node: ast.AST, scope: Scope) -> Optional[str]:
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

    def resolve(self, node: ast.AST, scope: Scope) -> Any:
        """A local Func or Klass, or a qualified name (str), or None."""
        method = {ast.Name: self.resolve_name, ast.Attribute: self.resolve_attribute}.get(type(node))
        return method(node, scope) if method else None

    def resolve_name(self, node: ast.Name, scope: Scope) -> Any:
        for level in scope.chain():
            for table in (level.functions, level.classes):
                if node.id in table:
                    return table[node.id]
            if node.id in level.aliases:
                return canonical(level.aliases[node.id])
            if level.bound_here(node.id):
                return None
        return node.id if node.id in BUILTIN_NAMES else None

    def resolve_attribute(self, node: ast.Attribute, scope: Scope) -> Any:
        base = node.value
        if isinstance(base, ast.Name) and base.id in ("self", "cls") and scope.klass is not None:
            return scope.klass.method(node.attr)
        if isinstance(base, ast.Call) and isinstance(base.func, ast.Name) and base.func.id == "super":
            parents = scope.klass.bases if scope.klass is not None else []
            return next((parent.method(node.attr) for parent in parents
                         if isinstance(parent, Klass) and parent.method(node.attr)), None)
        owner = self.resolve(base, scope)
        if isinstance(owner, Klass):
            return owner.method(node.attr)
        value = self.value_of(base, scope)
        if value is not None and value.kind == "instance":
            return value.data["klass"].method(node.attr)
        return self.qualified(node, scope)

    # ----- constants ------------------------------------------------------------------------------------------
    def const(self, node: Optional[ast.AST], scope: Scope, depth: int = 0) -> Any:
        """The literal value of an expression where it can be known (literals, constants, parameter defaults)."""
        if node is None or depth > 8:
            return NO_VALUE
        value = literal(node)
        if has_value(value):
            return value
        method = {ast.Name: self.const_name, ast.BinOp: self.const_arithmetic}.get(type(node))
        return method(node, scope, depth) if method else NO_VALUE

    def const_name(self, node: ast.Name, scope: Scope, depth: int) -> Any:
        for level in scope.chain():
            if node.id in level.bindings:
                return level.bindings[node.id]
            if node.id in level.exprs:
                if level.assigned.get(node.id, 0) == 1:
                    return self.const(level.exprs[node.id], level, depth + 1)
                return NO_VALUE
            if node.id in level.params:
                return self.const(level.params[node.id], level.parent or level, depth + 1)
            if level is self.module and node.id in level.constants:
                found = level.constants[node.id]
                return found if not isinstance(found, ast.AST) else NO_VALUE
        return NO_VALUE

    def const_arithmetic(self, node: ast.BinOp, scope: Scope, depth: int) -> Any:
        """`+`, `*` (of factors under a million), `-` and `//` (by a non-zero) of two known integers."""
        operation = ARITHMETIC.get(type(node.op))
        if operation is None:
            return NO_VALUE
        left, right = self.const(node.left, scope, depth + 1), self.const(node.right, scope, depth + 1)
        if isinstance(left, int) and isinstance(right, int) and not isinstance(left, bool):
            try:
                return operation(left, right)
            except (OverflowError, ZeroDivisionError):
                return NO_VALUE
        return NO_VALUE

    # ----- DataLoader workers ---------------------------------------------------------------------------------
    def loader_workers(self, call: ast.Call, scope: Scope) -> Tuple[Optional[int], str]:
        """A DataLoader's num_workers where the script says it: a literal or constant, `int(opt.workers)` with an
        argparse default, a config dict, or a `**kwargs` dict (`{'num_workers': 1} if cuda else {}`: may start
        workers). (None, "") when unknown or absent."""
        node = _argument(call, "num_workers", 5)
        if node is not None:
            return self.workers_value(node, scope, 0)
        for keyword in call.keywords:
            if keyword.arg is None:
                for mapping, branch in self.kwargs_dicts(keyword.value, scope, 0):
                    for key, value in zip(mapping.keys, mapping.values):
                        if isinstance(key, ast.Constant) and key.value == "num_workers":
                            workers, note = self.workers_value(value, scope, 0)
                            if isinstance(workers, int) and workers > 0:
                                where = f"from **{segment(self.lines, keyword.value, 30)}"
                                return workers, ", ".join(p for p in (note, where, branch) if p)
        return None, ""

    def workers_value(self, node: ast.AST, scope: Scope, depth: int) -> Tuple[Optional[int], str]:
        if depth > 6:
            return None, ""
        value = self.const(node, scope)
        if isinstance(value, int) and not isinstance(value, bool):
            return value, ""
        method = {ast.Call: self.workers_cast, ast.Attribute: self.workers_option, ast.Subscript: self.workers_item,
                  ast.IfExp: self.workers_either}.get(type(node))
        return method(node, scope, depth) if method else (None, "")

    def workers_cast(self, node: ast.Call, scope: Scope, depth: int) -> Tuple[Optional[int], str]:
        """`int(x)`: x's value."""
        if isinstance(node.func, ast.Name) and node.func.id == "int" and len(node.args) == 1:
            return self.workers_value(node.args[0], scope, depth + 1)
        return None, ""

    def workers_option(self, node: ast.Attribute, scope: Scope, depth: int) -> Tuple[Optional[int], str]:
        """`args.workers`: the option's argparse default."""
        if isinstance(node.value, ast.Name) and node.attr in self.argparse_defaults():
            option = self.argparse_defaults()[node.attr]
            return option[0], f"the default of {option[1]}"
        return None, ""

    def workers_item(self, node: ast.Subscript, scope: Scope, depth: int) -> Tuple[Optional[int], str]:
        """`CONFIG["workers"]`: the value of the key in the dict literal CONFIG is."""
        for mapping, _ in self.kwargs_dicts(node.value, scope, depth + 1):
            key = _subscript_key(node)
            for name, value_node in zip(mapping.keys, mapping.values):
                if isinstance(name, ast.Constant) and name.value == key:
                    return self.workers_value(value_node, scope, depth + 1)
        return None, ""

    def workers_either(self, node: ast.IfExp, scope: Scope, depth: int) -> Tuple[Optional[int], str]:
        """`a if cond else b`: the larger of the two known, said to be one branch's."""
        branches = [self.workers_value(branch, scope, depth + 1) for branch in (node.body, node.orelse)]
        known = [b for b in branches if isinstance(b[0], int)]
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
                if level is self.module and isinstance(level.constants.get(node.id), ast.Dict):
                    return [(level.constants[node.id], "")]
            return []
        if isinstance(node, ast.Subscript):
            key = _subscript_key(node)
            for mapping, note in self.kwargs_dicts(node.value, scope, depth + 1):
                for name, value in zip(mapping.keys, mapping.values):
                    if isinstance(name, ast.Constant) and name.value == key:
                        return [(found, note) for found, _ in self.kwargs_dicts(value, scope, depth + 1)]
            return []
        mapping = self.dict_literal(node, scope)
        return [(mapping, "")] if mapping is not None else []

    def argparse_defaults(self) -> Dict[str, Tuple[int, str]]:
        """dest -> (integer default, option) of the script's `add_argument(..., default=N)` calls; a dest given two
        different defaults is left out."""
        if getattr(self, "_argparse", None) is None:
            found: Dict[str, Tuple[int, str]] = {}
            clashes = set()
            for dest, default, shown in filter(None, map(_integer_default, self.index.walk())):
                if dest in found and found[dest][0] != default:
                    clashes.add(dest)
                found[dest] = (default, shown)
            self._argparse = {dest: value for dest, value in found.items() if dest not in clashes}
        return self._argparse

    def dict_literal(self, node: Optional[ast.AST], scope: Scope) -> Optional[ast.Dict]:
        if isinstance(node, ast.Dict):
            return node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            return ast.Dict(keys=[ast.Constant(kw.arg) for kw in node.keywords if kw.arg],
                            values=[kw.value for kw in node.keywords if kw.arg])
        if isinstance(node, ast.Name):
            for level in scope.chain():
                if node.id in level.exprs:
                    return level.exprs[node.id] if isinstance(level.exprs[node.id], ast.Dict) else None
                if level is self.module:
                    found = level.constants.get(node.id)
                    return found if isinstance(found, ast.Dict) else None
        return None

    # ----- values ---------------------------------------------------------------------------------------------
    def value_of(self, node: Optional[ast.AST], scope: Scope, depth: int = 0) -> Optional[Val]:
        if node is None or depth > 6:
            return None
        if isinstance(node, ast.Name):
            return scope.lookup("values", node.id)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self" and scope.klass is not None:
                return scope.klass.attrs.get(node.attr)
            owner = self.value_of(node.value, scope, depth + 1)
            if owner is not None and owner.kind == "instance":
                return owner.data["klass"].attrs.get(node.attr)
            return None
        if isinstance(node, ast.IfExp):
            return self.value_of(node.body, scope, depth + 1) or self.value_of(node.orelse, scope, depth + 1)
        if isinstance(node, ast.Call):
            return self.call_value(node, scope, depth)
        return None

    def call_value(self, call: ast.Call, scope: Scope, depth: int) -> Optional[Val]:
        func = call.func
        if isinstance(func, ast.Attribute):
            owner = self.value_of(func.value, scope, depth + 1)
            if owner is not None and owner.kind == "mp_context":
                if func.attr == "Process":
                    return Val("process", {"call": f"{dotted(func) or 'ctx'}.Process", "method": owner.data["method"],
                                           "line": call.lineno})
                return None
        target = self.resolve(func, scope)
        if isinstance(target, Klass):
            if target.is_process():
                return Val("process", {"call": f"{target.name} (a multiprocessing.Process)", "method": "default",
                                       "line": call.lineno, "klass": target})
            return Val("instance", {"klass": target})
        if isinstance(target, Func):
            return self.returned(target, scope, depth)
        kind = _call_kind(target) if isinstance(target, str) else None
        return getattr(self, f"made_{kind}")(call, target, scope, depth) if kind else None

    def returned(self, func: Func, scope: Scope, depth: int) -> Optional[Val]:
        """The first value the function is seen to return."""
        if func.events is None and self.depth < MAX_CALL_DEPTH:
            self.summary(func)
        for ret in func.returns:
            value = self.value_of(ret, func.scope or scope, depth + 1)
            if value is not None:
                return value
        return None

    # the values known library calls make, by the kind _call_kind gives them
    def made_mp_context(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        method = self.const(call.args[0], scope) if call.args else NO_VALUE
        return Val("mp_context", {"method": method if isinstance(method, str) else "default"})

    def made_process(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        return Val("process", {"call": target, "method": "default", "line": call.lineno})

    def made_dataloader(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        workers, note = self.loader_workers(call, scope)
        return Val("dataloader", {"workers": workers, "workers_note": note,
                                  "method": self.context_method(_argument(call, "multiprocessing_context", 11), scope),
                                  "line": call.lineno, "what": segment(self.lines, call, 70)})

    def made_lightning(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        spawn, method = self.lightning_spawn(call, scope)
        kind = "fabric" if target == "lightning.Fabric" else "lightning"
        return Val(kind, {"spawn": spawn, "method": method, "line": call.lineno, "what": segment(self.lines, call, 70)})

    def made_hf_trainer(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        value = self.value_of(_argument(call, "args", 1), scope, depth + 1)
        workers = value.data.get("workers") if value is not None and value.kind == "hf_args" else None
        return Val("hf_trainer", {"workers": workers, "line": call.lineno, "name": target})

    def made_hf_args(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        workers = self.const(_argument(call, "dataloader_num_workers", None), scope)
        return Val("hf_args", {"workers": workers if isinstance(workers, int) else None, "line": call.lineno})

    def made_thread(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        return Val("thread", {"target": _argument(call, "target", 1)})

    def made_device(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Optional[Val]:
        return Val("cuda_device") if call.args and self.cuda_like(call.args[0], scope) else None

    def context_method(self, node: Optional[ast.AST], scope: Scope) -> str:
        if node is None:
            return "default"
        value = self.const(node, scope)
        if isinstance(value, str):
            return value
        ctx = self.value_of(node, scope)
        if ctx is not None and ctx.kind == "mp_context":
            return ctx.data["method"]
        return "default"

    def lightning_spawn(self, call: ast.Call, scope: Scope) -> Tuple[Optional[bool], str]:
        """Whether a Lightning Trainer/Fabric uses a spawn-based strategy, and the start method."""
        for name in ("strategy", "accelerator", "distributed_backend"):
            node = _argument(call, name, None)
            if node is None:
                continue
            value = self.const(node, scope)
            if isinstance(value, str):
                text = value.lower()
                if "spawn" in text:
                    return True, "spawn"
                if text in ("ddp_fork", "ddp_notebook") or text.startswith(("ddp_fork", "ddp_notebook")):
                    return False, "fork"
                continue
            if isinstance(node, ast.Call):
                strategy = self.qualified(node.func, scope) or ""
                short = strategy.rsplit(".", 1)[-1]
                if "Spawn" in short:
                    return True, "spawn"
                start = self.const(_argument(node, "start_method", None), scope)
                if isinstance(start, str) and start in SPAWN_METHODS:
                    return True, start
        return False, "default"

    def cuda_like(self, node: Optional[ast.AST], scope: Scope, depth: int = 0) -> bool:
        """Does this expression name a CUDA device (`"cuda"`, `"cuda:0"`, `torch.device("cuda")`, `0`)?"""
        if node is None or depth > 4:
            return False
        value = literal(node)
        if isinstance(value, str):
            return value.startswith("cuda")
        if isinstance(value, int) and not isinstance(value, bool):
            return value >= 0
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            return isinstance(first, ast.Constant) and str(first.value).startswith("cuda")
        if isinstance(node, ast.IfExp):
            return self.cuda_like(node.body, scope, depth + 1) or self.cuda_like(node.orelse, scope, depth + 1)
        if isinstance(node, ast.Call):
            if self.qualified(node.func, scope) == "torch.device" and node.args:
                return self.cuda_like(node.args[0], scope, depth + 1)
            return False
        found = self.value_of(node, scope)
        return found is not None and found.kind == "cuda_device"

    # ----- walking --------------------------------------------------------------------------------------------
    def summary(self, func: Func) -> List[Event]:
        """The events of one function, relative to its entry (computed once)."""
        if func.events is not None:
            return func.events
        func.events = []  # cycle guard: a recursive call sees an empty summary
        scope = Scope(func.parent if func.cls is None else func.parent, func)
        node = func.node
        args = node.args
        positional = list(getattr(args, "posonlyargs", [])) + list(args.args)
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        for arg, default in zip(positional, defaults):
            scope.params[arg.arg] = default
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            scope.params[arg.arg] = default
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                scope.params[extra.arg] = None
        imports_of(node.body, scope.aliases)
        self.collect_definitions(node.body, scope, None, prefix=func.name + ".")
        func.scope = scope
        events = EventList(MAX_SUMMARY_EVENTS)
        self.depth += 1
        try:
            self.walk_block(node.body, scope, func.name, False, events)
        finally:
            self.depth -= 1
        func.events = list(events)
        return func.events

    def replay(self, func: Func, line: int, frame: str, guarded: bool, out: List[Event],
               call: Optional[ast.Call] = None, scope: Optional[Scope] = None) -> None:
        """The events of `func` as seen from a call at `line`; a parameter the function iterates becomes the
        DataLoader the call passes (`train(model, train_loader)`), or a parameter of the caller in turn."""
        if self.depth >= MAX_CALL_DEPTH:
            self.truncated = True
            return
        for event in self.summary(func):
            moved = event.relocated(frame, line, guarded)
            if event.kind != "param_iter":
                self.emit(out, moved)
                continue
            argument = _passed(func, call, event.data["param"]) if call is not None and scope is not None else None
            for loader in self.iterated(argument, scope) if argument is not None else []:
                if loader.kind == "param":
                    self.emit(out, Event("param_iter", moved.line, moved.column, moved.path,
                                         {"param": loader.data["name"], "how": event.data["how"],
                                          "call": f"parameter {loader.data['name']}"}, moved.guarded))
                    continue
                inner: List[Event] = EventList(1)
                self.loader_iterated(loader, func.node, f"(passed as `{event.data['param']}`) {event.data['how']}",
                                     frame, guarded, inner)
                for start in inner:
                    self.emit(out, Event(start.kind, moved.line, moved.column, moved.path, start.data, moved.guarded))

    def emit(self, out: EventList, event: Event) -> None:
        if not out.add(event):
            self.truncated = True

    def event(self, out: List[Event], kind: str, node: ast.AST, frame: str, guarded: bool, **data) -> None:
        self.emit(out, Event(kind, node.lineno, node.col_offset + 1, (f"{frame}:{node.lineno}",), data, guarded))

    def walk_block(self, body: List[ast.stmt], scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        for stmt in body:
            self.walk_stmt(stmt, scope, frame, guarded, out)

    def walk_stmt(self, stmt: ast.stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        """One statement, dispatched on its kind as ast.NodeVisitor does (`stmt_If`, `stmt_For` …); any other kind
        has its expressions walked."""
        getattr(self, f"stmt_{type(stmt).__name__}", self.stmt_other)(stmt, scope, frame, guarded, out)

    def stmt_other(self, stmt: ast.stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.walk_expr(child, scope, frame, guarded, out)

    def stmt_FunctionDef(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        for decorator in stmt.decorator_list:
            self.walk_expr(decorator, scope, frame, guarded, out)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, stmt: ast.ClassDef, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        klass = scope.classes.get(stmt.name)
        # a class body runs where it is written; its methods do not
        body = [s for s in stmt.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if klass is not None or body:
            self.walk_block(body, scope, frame, guarded, out)

    def stmt_If(self, stmt: ast.If, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        guard = is_main_guard(stmt.test)
        if guard is None:
            self.walk_expr(stmt.test, scope, frame, guarded, out)
        self.walk_block(stmt.body, scope, frame, guarded or guard is True, out)
        self.walk_block(stmt.orelse, scope, frame, guarded or guard is False, out)

    def stmt_For(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        self.walk_expr(stmt.iter, scope, frame, guarded, out)
        for loader in self.iterated(stmt.iter, scope):
            self.loader_iterated(loader, stmt, f"in `for … in {segment(self.lines, stmt.iter, 50)}`", frame, guarded,
                                 out)
        self.bind_loop(stmt, scope)
        self.walk_block(stmt.body, scope, frame, guarded, out)
        self.walk_block(stmt.orelse, scope, frame, guarded, out)

    stmt_AsyncFor = stmt_For

    def stmt_While(self, stmt: ast.While, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        self.walk_expr(stmt.test, scope, frame, guarded, out)
        self.walk_block(stmt.body, scope, frame, guarded, out)
        self.walk_block(stmt.orelse, scope, frame, guarded, out)

    def stmt_With(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        for item in stmt.items:
            self.walk_expr(item.context_expr, scope, frame, guarded, out)
            if isinstance(item.optional_vars, ast.Name):
                self.bind(item.optional_vars.id, item.context_expr, scope)
        self.walk_block(stmt.body, scope, frame, guarded, out)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        self.walk_block(stmt.body, scope, frame, guarded, out)
        for handler in stmt.handlers:
            self.walk_block(handler.body, scope, frame, guarded, out)
        self.walk_block(stmt.orelse, scope, frame, guarded, out)
        self.walk_block(stmt.finalbody, scope, frame, guarded, out)

    stmt_TryStar = stmt_Try

    def stmt_Match(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        self.walk_expr(stmt.subject, scope, frame, guarded, out)
        for case in stmt.cases:
            self.walk_block(case.body, scope, frame, guarded, out)

    def stmt_Assign(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        value = stmt.value
        if value is not None:
            self.walk_expr(value, scope, frame, guarded, out)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            self.assign(target, value, stmt, scope, frame, guarded, out, augmented=isinstance(stmt, ast.AugAssign))

    stmt_AnnAssign = stmt_AugAssign = stmt_Assign

    def stmt_Return(self, stmt: ast.Return, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        if stmt.value is not None:
            self.walk_expr(stmt.value, scope, frame, guarded, out)
            if scope.func is not None:
                scope.func.returns.append(stmt.value)

    def stmt_Import(self, stmt, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        if scope is not self.module:
            imports_of([stmt], scope.aliases)

    stmt_ImportFrom = stmt_Import

    def bind_loop(self, stmt: ast.AST, scope: Scope) -> None:
        """`for k, v in ENV.items()`: remember which keys `k` takes (for `os.environ[k] = v`)."""
        target, source = stmt.target, stmt.iter
        if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name) \
                and isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
                and source.func.attr == "items":
            mapping = self.dict_literal(source.func.value, scope)
            if mapping is not None:
                scope.loopkeys[target.elts[0].id] = {k.value for k in mapping.keys if isinstance(k, ast.Constant)}

    def bind(self, name: str, value: Optional[ast.AST], scope: Scope) -> None:
        scope.exprs[name] = value if value is not None else ast.Constant(None)
        scope.assigned[name] = scope.assigned.get(name, 0) + 1
        found = self.value_of(value, scope) if value is not None else None
        if found is None and value is not None and self.cuda_like(value, scope):
            found = Val("cuda_device")
        if found is not None:
            scope.values[name] = found
        else:
            scope.values.pop(name, None)

    def assign(self, target: ast.AST, value: Optional[ast.AST], stmt: ast.stmt, scope: Scope, frame: str,
               guarded: bool, out: List[Event], augmented: bool = False) -> None:
        if isinstance(target, ast.Name):
            if augmented:
                scope.assigned[target.id] = scope.assigned.get(target.id, 0) + 2
                return
            self.bind(target.id, value, scope)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                if isinstance(elt, ast.Name):
                    scope.exprs[elt.id] = ast.Constant(None)
                    scope.assigned[elt.id] = scope.assigned.get(elt.id, 0) + 2
                    scope.values.pop(elt.id, None)
        elif isinstance(target, ast.Attribute):
            path = attribute_path(target)
            if path is not None:
                scope.attrs[path] = (value, stmt.lineno)
            if isinstance(target.value, ast.Name) and target.value.id == "self" and scope.klass is not None:
                found = self.value_of(value, scope)
                if found is not None:
                    scope.klass.attrs[target.attr] = found
        elif isinstance(target, ast.Subscript):
            if self.qualified(target.value, scope) == "os.environ" and self.names_cvd(target.slice, scope):
                self.event(out, "cvd", stmt, frame, guarded, what=segment(self.lines, stmt, 80))

    def names_cvd(self, key: ast.AST, scope: Scope) -> bool:
        index = getattr(ast, "Index", None)  # Python < 3.9 shape; the class is gone from newer Pythons
        if index is not None and isinstance(key, index):
            key = key.value  # type: ignore[attr-defined]
        if self.const(key, scope) == CVD:
            return True
        if isinstance(key, ast.Name):
            keys = scope.lookup("loopkeys", key.id)
            return bool(keys) and CVD in keys
        return False

    def iterated(self, node: ast.AST, scope: Scope, depth: int = 0) -> List[Val]:
        """The DataLoaders that iterating `node` iterates (through enumerate/zip/tqdm/iter…)."""
        if depth > 4:
            return []
        value = self.value_of(node, scope)
        if value is not None and value.kind == "dataloader":
            return [value]
        if value is None and isinstance(node, ast.Name) and scope.func is not None and node.id in scope.params:
            return [Val("param", {"name": node.id})]  # the caller's argument decides (see replay)
        if isinstance(node, ast.Call):
            name = self.qualified(node.func, scope) or dotted(node.func) or ""
            if name in WRAPPERS or name.rsplit(".", 1)[-1] in ("tqdm", "enumerate", "zip"):
                found: List[Val] = []
                for arg in node.args:
                    found.extend(self.iterated(arg, scope, depth + 1))
                return found
        return []

    def loader_iterated(self, loader: Val, node: ast.AST, how: str, frame: str, guarded: bool,
                        out: List[Event]) -> None:
        if loader.kind == "param":
            self.event(out, "param_iter", node, frame, guarded, param=loader.data["name"], how=how,
                       call=f"parameter {loader.data['name']}")  # zip(a, b): one event per parameter
            return
        workers = loader.data.get("workers")
        if not isinstance(workers, int) or workers <= 0:
            return
        note = loader.data.get("workers_note")
        self.event(out, "start", node, frame, guarded, call="torch.utils.data.DataLoader",
                   what=f"iterating the DataLoader of line {loader.data['line']} (num_workers={workers}"
                        f"{', ' + note if note else ''}) {how}",
                   method=loader.data.get("method", "default"))

    def walk_expr(self, expr: ast.AST, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        for node in self.index.postorder(expr):
            if isinstance(node, ast.Call):
                self.call(node, scope, frame, guarded, out)
            elif isinstance(node, ast.comprehension):
                for loader in self.iterated(node.iter, scope):
                    self.loader_iterated(loader, node.iter, "in a comprehension", frame, guarded, out)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                self.bind(node.target.id, node.value, scope)

    # ----- calls ----------------------------------------------------------------------------------------------
    def call(self, call: ast.Call, scope: Scope, frame: str, guarded: bool, out: List[Event]) -> None:
        func = call.func
        line = call.lineno
        if isinstance(func, ast.Attribute):
            owner = self.value_of(func.value, scope)
            if owner is not None:
                self.method_call(owner, func.attr, call, scope, frame, guarded, out)
        target = self.resolve(func, scope)
        if isinstance(target, Func):
            self.replay(target, line, frame, guarded, out, call, scope)
        elif isinstance(target, Klass):
            init = target.method("__init__")
            if init is not None:
                self.replay(init, line, frame, guarded, out, call, scope)
        elif isinstance(target, str):
            self.library_call(target, call, scope, frame, guarded, out)
        if isinstance(func, ast.Name) and func.id in self.registry and not isinstance(target, Klass):
            for registered in self.registry[func.id]:  # `app()` of a typer/click app runs its commands
                self.replay(registered, line, frame, guarded, out)
        self.cuda_call(call, target, scope, frame, guarded, out)

    def method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                    out: List[Event]) -> None:
        """`owner.attr(…)` on a value the walk knows (a process, a Trainer …), dispatched by the value's kind."""
        method = {"mp_context": self.context_method_call, "process": self.process_method_call,
                  "thread": self.thread_method_call, "lightning": self.lightning_method_call,
                  "fabric": self.fabric_method_call, "hf_trainer": self.hf_trainer_method_call}.get(owner.kind)
        if method is not None:
            method(owner, attr, call, scope, frame, guarded, out)

    def context_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                            out: List[Event]) -> None:
        if attr in ("Pool", "Manager"):
            self.event(out, "start", call, frame, guarded, call=f"multiprocessing.{attr}",
                       what=segment(self.lines, call, 80), method=owner.data["method"])

    def process_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                            out: List[Event]) -> None:
        if attr == "start":
            self.event(out, "start", call, frame, guarded, call=owner.data["call"],
                       what=f"{owner.data['call']}(…).start()", method=owner.data["method"])

    def thread_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                           out: List[Event]) -> None:
        target = owner.data.get("target")
        func = self.resolve(target, scope) if attr == "start" and target is not None else None
        if isinstance(func, Func):
            self.replay(func, call.lineno, frame, guarded, out)

    def lightning_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str,
                              guarded: bool, out: List[Event]) -> None:
        if attr not in LIGHTNING_RUNS:
            return
        if owner.data.get("spawn"):
            self.event(out, "start", call, frame, guarded, call="lightning.Trainer." + attr,
                       what=f"trainer.{attr}() with a spawn strategy ({owner.data['what']}, line "
                            f"{owner.data['line']})", method=owner.data["method"])
        for arg in list(call.args) + [kw.value for kw in call.keywords]:
            for loader in self.iterated(arg, scope):
                self.loader_iterated(loader, call, f"by trainer.{attr}()", frame, guarded, out)

    def fabric_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                           out: List[Event]) -> None:
        if attr == "launch" and owner.data.get("spawn"):
            self.event(out, "start", call, frame, guarded, call="lightning.Fabric.launch",
                       what=f"fabric.launch() with a spawn strategy ({owner.data['what']})",
                       method=owner.data["method"])

    def hf_trainer_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, frame: str,
                               guarded: bool, out: List[Event]) -> None:
        workers = owner.data.get("workers")
        if attr in HF_RUNS and isinstance(workers, int) and workers > 0:
            self.event(out, "start", call, frame, guarded, call=f"{owner.data['name']}.{attr}",
                       what=f"trainer.{attr}() with dataloader_num_workers={workers}: its DataLoader starts "
                            f"{workers} worker processes", method="default")

    def library_call(self, name: str, call: ast.Call, scope: Scope, frame: str, guarded: bool,
                     out: List[Event]) -> None:
        if name in STARTERS:
            method = STARTERS[name]
            if name == "torch.multiprocessing.start_processes":
                chosen = self.const(_argument(call, "start_method", 4), scope)
                method = chosen if isinstance(chosen, str) else method
            elif name == "concurrent.futures.ProcessPoolExecutor":
                method = self.context_method(_argument(call, "mp_context", 1), scope)
            self.event(out, "start", call, frame, guarded, call=name, what=segment(self.lines, call, 80),
                       method=method)
            if name == "nemo_run.run":
                self.event(out, "nemo", call, frame, guarded, **self.nemo_run_info(call, scope))
        if name == "multiprocessing.set_start_method":
            method = self.const(call.args[0] if call.args else _argument(call, "method", None), scope)
            if isinstance(method, str):
                self.event(out, "method", call, frame, guarded, method=method)
        elif name in CALLS_ITS_ARGUMENT and call.args:
            func = self.resolve(call.args[0], scope)
            if isinstance(func, Func):
                self.replay(func, call.lineno, frame, guarded, out)
        elif name in CONSUMERS:
            for arg in call.args:
                for loader in self.iterated(arg, scope):
                    self.loader_iterated(loader, call, f"by {name}()", frame, guarded, out)
        elif name in ("os.environ.update", "os.environ.setdefault", "os.putenv"):
            if self.sets_cvd(name, call, scope):
                self.event(out, "cvd", call, frame, guarded, what=segment(self.lines, call, 80))

    def sets_cvd(self, name: str, call: ast.Call, scope: Scope) -> bool:
        if name == "os.environ.update":
            if any(kw.arg == CVD for kw in call.keywords):
                return True
            for arg in call.args:
                mapping = self.dict_literal(arg, scope)
                if mapping is not None and any(self.const(k, scope) == CVD for k in mapping.keys if k is not None):
                    return True
            return False
        return bool(call.args) and self.names_cvd(call.args[0], scope)

    def cuda_call(self, call: ast.Call, target: Any, scope: Scope, frame: str, guarded: bool,
                  out: List[Event]) -> None:
        """Record the first statement that may initialise CUDA (per function walk: one is enough)."""
        what = self.cuda_initialiser(call, target, scope)
        if what:
            self.event(out, "cuda", call, frame, guarded, what=what)

    def cuda_initialiser(self, call: ast.Call, target: Any, scope: Scope) -> Optional[str]:
        """The call, written short, where it may initialise CUDA: a torch.cuda function that does, `x.cuda()`,
        `x.to("cuda")`, a `device=` on the GPU or a `device_map=` (but "cpu", "meta")."""
        if isinstance(target, str) and target.startswith("torch.cuda."):
            return f"{target}()" if _initialises_cuda(target) else None
        method = call.func.attr if isinstance(call.func, ast.Attribute) and target is None else None
        if method == "cuda":
            return f"{segment(self.lines, call.func.value, 30)}.cuda()"
        if method == "to" and ((call.args and self.cuda_like(call.args[0], scope))
                               or self.cuda_like(_argument(call, "device", None), scope)):
            return segment(self.lines, call, 60)
        on_gpu = any(kw.arg == "device" and self.cuda_like(kw.value, scope) and not (
                         isinstance(target, str) and target == "torch.device")
                     or kw.arg == "device_map" and self.const(kw.value, scope) not in (None, "cpu", "meta")
                     for kw in call.keywords)
        return segment(self.lines, call, 60) if on_gpu else None

    # ----- nemo_run -------------------------------------------------------------------------------------------
    def nemo_run_info(self, call: ast.Call, scope: Scope) -> Dict[str, Any]:
        direct_node = _argument(call, "direct", None)
        direct = self.const(direct_node, scope) if direct_node is not None else False
        info: Dict[str, Any] = {"direct": direct if isinstance(direct, bool) else None,
                                "direct_given": direct_node is not None,
                                "devices": None, "num_nodes": None, "evidence": None, "executor": None}
        executor = _argument(call, "executor", 1)
        if executor is not None:
            info["executor"] = self.executor_kind(executor, scope)
        recipe = call.args[0] if call.args else _argument(call, "fn_or_script", None)
        if recipe is not None:
            devices, nodes, evidence = self.recipe_devices(recipe, scope, 0)
            info.update(devices=devices, num_nodes=nodes, evidence=evidence)
        return info

    def executor_kind(self, node: ast.AST, scope: Scope, depth: int = 0) -> str:
        """"local" for a nemo_run LocalExecutor (directly, through a name or a local factory function)."""
        if depth > 4:
            return "unknown"
        if isinstance(node, ast.Name):
            for level in scope.chain():
                if node.id in level.exprs:
                    return self.executor_kind(level.exprs[node.id], level, depth + 1)
            return "unknown"
        if isinstance(node, ast.Call):
            target = self.resolve(node.func, scope)
            if isinstance(target, str):
                return "local" if target.endswith("LocalExecutor") else target.rsplit(".", 1)[-1]
            if isinstance(target, Func):
                self.summary(target)
                for ret in target.returns:
                    kind = self.executor_kind(ret, target.scope or scope, depth + 1)
                    if kind != "unknown":
                        return kind
        return "unknown"

    def recipe_devices(self, node: ast.AST, scope: Scope, depth: int) -> Tuple[Any, Any, Optional[str]]:
        """(devices, num_nodes, evidence) that a nemo_run recipe expression asks for, where they can be known."""
        method = {ast.Name: self.named_recipe_devices, ast.Call: self.made_recipe_devices}.get(type(node))
        return method(node, scope, depth) if method is not None and depth <= 4 else (None, None, None)

    def named_recipe_devices(self, node: ast.Name, scope: Scope, depth: int) -> Tuple[Any, Any, Optional[str]]:
        """`recipe.trainer.devices = 8` and `recipe.trainer.num_nodes = 2` where the script sets them, else what
        the expression bound to the name asks for."""
        devices = nodes = evidence = None
        for level in scope.chain():
            assigned = level.attrs.get((node.id, "trainer.devices"))
            value = self.const(assigned[0], level) if assigned is not None and devices is None else None
            if isinstance(value, int):
                devices, evidence = value, f"{node.id}.trainer.devices = {value} (line {assigned[1]})"
            assigned = level.attrs.get((node.id, "trainer.num_nodes"))
            value = self.const(assigned[0], level) if assigned is not None and nodes is None else None
            if isinstance(value, int):
                nodes = value
            if node.id in level.exprs:
                if devices is None or nodes is None:
                    sub_devices, sub_nodes, sub_evidence = self.recipe_devices(level.exprs[node.id], level, depth + 1)
                    if devices is None and sub_devices is not None:
                        devices, evidence = sub_devices, sub_evidence
                    nodes = sub_nodes if nodes is None else nodes
                break
        return devices, nodes, evidence

    def made_recipe_devices(self, node: ast.Call, scope: Scope, depth: int) -> Tuple[Any, Any, Optional[str]]:
        """A recipe made by a call: what the script's own factory returns (its arguments bound), or the call's
        `num_gpus_per_node`/`devices` and `num_nodes`."""
        target = self.resolve(node.func, scope)
        if isinstance(target, Func):
            return self.returned_recipe_devices(target, node, scope, depth)
        devices = nodes = evidence = None
        for kw in node.keywords:
            value = self.const(kw.value, scope) if kw.arg in ("num_gpus_per_node", "devices", "num_nodes") else None
            if isinstance(value, int) and kw.arg == "num_nodes":
                nodes = value
            elif isinstance(value, int):
                devices, evidence = value, f"{kw.arg}={value} (line {kw.value.lineno})"
        return devices, nodes, evidence

    def returned_recipe_devices(self, target: Func, node: ast.Call, scope: Scope,
                                depth: int) -> Tuple[Any, Any, Optional[str]]:
        self.summary(target)
        fscope = target.scope
        if fscope is None:
            return None, None, None
        saved = dict(fscope.bindings)
        fscope.bindings.update(self.call_bindings(target, node, scope))
        try:
            for ret in target.returns:
                sub = self.recipe_devices(ret, fscope, depth + 1)
                if sub[0] is not None or sub[1] is not None:
                    return sub
        finally:
            fscope.bindings = saved
        return None, None, None

    def call_bindings(self, func: Func, call: ast.Call, scope: Scope) -> Dict[str, Any]:
        """Parameter values a call passes, where they are literals (else the parameter's default applies)."""
        args = func.node.args
        names = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
        if func.cls is not None and names:
            names = names[1:]
        bound: Dict[str, Any] = {}
        for name, value in zip(names, call.args):
            found = self.const(value, scope)
            if has_value(found):
                bound[name] = found
        for kw in call.keywords:
            if kw.arg:
                found = self.const(kw.value, scope)
                if has_value(found):
                    bound[kw.arg] = found
        return bound


BUILTIN_NAMES = {"list", "tuple", "next", "sorted", "set", "sum", "any", "all", "dict", "iter", "enumerate", "zip",
                 "max", "min", "super", "print"}


def _subscript_key(node: ast.Subscript) -> Any:
    """The literal key of `x["key"]` (Python 3.8 wraps it in ast.Index)."""
    key = node.slice
    return literal(key.value if type(key).__name__ == "Index" else key)


def _passed(func: Func, call: ast.Call, param: str) -> Optional[ast.AST]:
    """The expression `call` passes for `func`'s parameter `param` (None where it cannot be told)."""
    args = func.node.args
    names = [a.arg for a in list(getattr(args, "posonlyargs", [])) + list(args.args)]
    if func.cls is not None and names:
        names = names[1:]
    return _argument(call, param, names.index(param) if param in names else None)


def _integer_default(node: ast.AST) -> Optional[Tuple[str, int, str]]:
    """(dest, integer default, the option it is shown as) of an `add_argument(..., default=N)` call, else None."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
        return None
    options = [literal(arg) for arg in node.args if isinstance(literal(arg), str)]
    given = _argument(node, "dest", None)
    dest = literal(given) if given else NO_VALUE
    if not isinstance(dest, str):  # argparse's: the first long option, else the first option, without dashes
        first = next((o for o in options if o.startswith("--")), options[0] if options else "")
        dest = first.lstrip("-").replace("-", "_")
    given = _argument(node, "default", None)
    default = literal(given) if given else NO_VALUE
    if isinstance(default, str) and default.isdigit():
        default = int(default)
    if not dest or not isinstance(default, int) or isinstance(default, bool):
        return None
    return dest, default, next((o for o in options if o.startswith("--")), dest)


def _initialises_cuda(name: str) -> bool:
    """Whether a torch.cuda function (not a submodule's) initialises CUDA."""
    short = name[len("torch.cuda."):]
    return not (short in CUDA_LAZY or name.startswith(CUDA_LAZY_PREFIXES) or "." in short)


def _argument(call: ast.Call, name: str, position: Optional[int]) -> Optional[ast.AST]:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and len(call.args) > position and not any(
            isinstance(arg, ast.Starred) for arg in call.args[:position + 1]):
        return call.args[position]
    return None


CALL_KINDS = {"multiprocessing.get_context": "mp_context", "lightning.Fabric": "lightning",
              "threading.Thread": "thread", "torch.device": "device"}


def _call_kind(target: str) -> Optional[str]:
    """Which `Walker.made_<kind>` knows the value a call of `target` makes; None for other calls."""
    for kind, names in (("process", PROCESS_CLASSES), ("dataloader", DATALOADERS), ("lightning", LIGHTNING_TRAINERS)):
        if target in names:
            return kind
    if _is_hf_trainer(target):
        return "hf_trainer"
    return "hf_args" if _is_hf_arguments(target) else CALL_KINDS.get(target)


def _is_hf_trainer(name: str) -> bool:
    return name.startswith(("transformers.", "trl.")) and name.endswith("Trainer")


def _is_hf_arguments(name: str) -> bool:
    return name.startswith(("transformers.", "trl.")) and (name.endswith("TrainingArguments")
                                                            or name.endswith("Config") and name.startswith("trl."))
