"""What a training script does when it is run, found statically: the script is parsed, never imported or run.

The walker follows the module's statements in order, enters the functions (and methods) they call in the same
file, and records events (`events.Event`) with the call path that led to them:

- `start`: something that starts processes (spawn/forkserver children re-import the script), with its method;
- `cuda`: a statement that may initialise CUDA (`torch.cuda.*`, `.cuda()`, `.to("cuda")`, `device="cuda"`);
- `cvd`: an assignment of `CUDA_VISIBLE_DEVICES` in `os.environ`;
- `method`: `multiprocessing.set_start_method(...)`;
- `nemo`: a nemo_run `run.run(...)` call, with what the recipe says about devices.

Each function is walked once; its events are replayed (with the caller's frame prepended) wherever it is called.
Code in functions that are never called from module level produces nothing.

This module walks statements and binds names; what a name or an expression stands for is `values`, what a call
does is `calls` (nemo_run recipes: `recipes`, DataLoader workers: `workers`), the functions and classes of a block
are `definitions`, literal values are `constants`, and the library calls known by name are `known_calls`.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Union

from gpudoctor.readers.python.calls import Calls, names_cvd
from gpudoctor.readers.python.constants import dict_literal, module_constants, passed
from gpudoctor.readers.python.definitions import collect_definitions
from gpudoctor.readers.python.events import At, Event, EventList, Trace
from gpudoctor.readers.python.names import attribute_path, imports_of, is_main_guard, segment
from gpudoctor.readers.python.recipes import Recipes
from gpudoctor.readers.python.scopes import MAX_CALL_DEPTH, Func, FunctionNode, Scope, Val, qualified
from gpudoctor.readers.python.tree import Tree
from gpudoctor.readers.python.values import Values
from gpudoctor.readers.python.workers import LoaderWorkers

MAX_SUMMARY_EVENTS = 400
MAX_EVENTS = 5000


class Walker:
    """Walks one parsed script. `run()` returns the module-level event trace."""

    def __init__(self, tree: Tree, lines: List[str]):
        self.index = tree  # the file's one walk
        self.lines = lines
        self.module = Scope(None)
        self.depth = 0
        self.registry: Dict[str, List[Func]] = {}  # decorator root name -> functions it registers
        self.trace = Trace()
        self.values = Values(lines, LoaderWorkers(tree, lines), self)
        self.calls = Calls(lines, self.values, Recipes(self.values, self), self.trace, self, self.registry)

    @property
    def truncated(self) -> bool:
        """Whether events were left out (a list full, calls nested deeper than MAX_CALL_DEPTH)."""
        return self.trace.truncated

    def run(self) -> List[Event]:
        body = self.index.body
        imports_of(body, self.module.aliases)
        collect_definitions(body, self.module, None, self.registry, self.values.resolve)
        self.module.constants = module_constants(body)
        events = EventList(MAX_EVENTS)
        self.walk_block(body, self.module, At("<module>", False, events))
        return list(events)

    # ----- functions ------------------------------------------------------------------------------------------
    def summary(self, func: Func) -> List[Event]:
        """The events of one function, relative to its entry (computed once)."""
        if func.events is not None:
            return func.events
        func.events = []  # cycle guard: a recursive call sees an empty summary
        scope = Scope(func.parent, func)
        node = func.node
        args = node.args
        positional = list(args.posonlyargs) + list(args.args)
        defaults: List[Optional[ast.expr]] = [None] * (len(positional) - len(args.defaults))
        for arg, default in zip(positional, defaults + list(args.defaults)):
            scope.params[arg.arg] = default
        for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults):
            scope.params[arg.arg] = kw_default
        for extra in (args.vararg, args.kwarg):
            if extra is not None:
                scope.params[extra.arg] = None
        imports_of(node.body, scope.aliases)
        collect_definitions(node.body, scope, None, self.registry, self.values.resolve, prefix=func.name + ".")
        func.scope = scope
        events = EventList(MAX_SUMMARY_EVENTS)
        self.depth += 1
        try:
            self.walk_block(node.body, scope, At(func.name, False, events))
        finally:
            self.depth -= 1
        func.events = list(events)
        return func.events

    def replay(self, func: Func, line: int, at: At, call: Optional[ast.Call] = None,
               scope: Optional[Scope] = None) -> None:
        """The events of `func` as seen from a call at `line`; a parameter the function iterates becomes the
        DataLoader the call passes (`train(model, train_loader)`), or a parameter of the caller in turn."""
        if self.depth >= MAX_CALL_DEPTH:
            self.trace.truncated = True
            return
        for event in self.summary(func):
            moved = event.relocated(at.frame, line, at.guarded)
            if event.kind != "param_iter":
                self.trace.emit(at.out, moved)
                continue
            argument = passed(func, call, event.data["param"]) if call is not None and scope is not None else None
            loaders = self.values.iterated(argument, scope) if argument is not None and scope is not None else []
            for loader in loaders:
                if loader.kind == "param":
                    self.trace.emit(at.out, Event("param_iter", moved.line, moved.column, moved.path,
                                                  {"param": loader.data["name"], "how": event.data["how"],
                                                   "call": f"parameter {loader.data['name']}"}, moved.guarded))
                    continue
                inner = EventList(1)
                self.calls.loader_iterated(loader, func.node, f"(passed as `{event.data['param']}`) "
                                           f"{event.data['how']}", At(at.frame, at.guarded, inner))
                for start in inner:
                    self.trace.emit(at.out, Event(start.kind, moved.line, moved.column, moved.path, start.data,
                                                  moved.guarded))

    # ----- statements -----------------------------------------------------------------------------------------
    def walk_block(self, body: List[ast.stmt], scope: Scope, at: At) -> None:
        for stmt in body:
            self.walk_stmt(stmt, scope, at)

    def walk_stmt(self, stmt: ast.stmt, scope: Scope, at: At) -> None:
        """One statement, dispatched on its kind as ast.NodeVisitor does (`stmt_If`, `stmt_For` …); any other kind
        has its expressions walked."""
        getattr(self, f"stmt_{type(stmt).__name__}", self.stmt_other)(stmt, scope, at)

    def stmt_other(self, stmt: ast.stmt, scope: Scope, at: At) -> None:
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.expr):
                self.walk_expr(child, scope, at)

    def stmt_FunctionDef(self, stmt: FunctionNode, scope: Scope, at: At) -> None:
        for decorator in stmt.decorator_list:
            self.walk_expr(decorator, scope, at)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, stmt: ast.ClassDef, scope: Scope, at: At) -> None:
        klass = scope.classes.get(stmt.name)
        # a class body runs where it is written; its methods do not
        body = [s for s in stmt.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if klass is not None or body:
            self.walk_block(body, scope, at)

    def stmt_If(self, stmt: ast.If, scope: Scope, at: At) -> None:
        guard = is_main_guard(stmt.test)
        if guard is None:
            self.walk_expr(stmt.test, scope, at)
        self.walk_block(stmt.body, scope, at.under(guard is True))
        self.walk_block(stmt.orelse, scope, at.under(guard is False))

    def stmt_For(self, stmt: Union[ast.For, ast.AsyncFor], scope: Scope, at: At) -> None:
        self.walk_expr(stmt.iter, scope, at)
        for loader in self.values.iterated(stmt.iter, scope):
            self.calls.loader_iterated(loader, stmt, f"in `for … in {segment(self.lines, stmt.iter, 50)}`", at)
        self.bind_loop(stmt, scope)
        self.walk_block(stmt.body, scope, at)
        self.walk_block(stmt.orelse, scope, at)

    stmt_AsyncFor = stmt_For

    def stmt_While(self, stmt: ast.While, scope: Scope, at: At) -> None:
        self.walk_expr(stmt.test, scope, at)
        self.walk_block(stmt.body, scope, at)
        self.walk_block(stmt.orelse, scope, at)

    def stmt_With(self, stmt: Union[ast.With, ast.AsyncWith], scope: Scope, at: At) -> None:
        for item in stmt.items:
            self.walk_expr(item.context_expr, scope, at)
            if isinstance(item.optional_vars, ast.Name):
                self.bind(item.optional_vars.id, item.context_expr, scope)
        self.walk_block(stmt.body, scope, at)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, stmt: ast.Try, scope: Scope, at: At) -> None:
        self.walk_block(stmt.body, scope, at)
        for handler in stmt.handlers:
            self.walk_block(handler.body, scope, at)
        self.walk_block(stmt.orelse, scope, at)
        self.walk_block(stmt.finalbody, scope, at)

    stmt_TryStar = stmt_Try

    def stmt_Match(self, stmt: Any, scope: Scope, at: At) -> None:
        """`match` (Python 3.10+, so its node is not named here: the doctor runs on 3.9)."""
        self.walk_expr(stmt.subject, scope, at)
        for case in stmt.cases:
            self.walk_block(case.body, scope, at)

    def stmt_Assign(self, stmt: Union[ast.Assign, ast.AnnAssign, ast.AugAssign], scope: Scope, at: At) -> None:
        value = stmt.value
        if value is not None:
            self.walk_expr(value, scope, at)
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            self.assign(target, value, stmt, scope, at, augmented=isinstance(stmt, ast.AugAssign))

    stmt_AnnAssign = stmt_AugAssign = stmt_Assign

    def stmt_Return(self, stmt: ast.Return, scope: Scope, at: At) -> None:
        if stmt.value is not None:
            self.walk_expr(stmt.value, scope, at)
            if scope.func is not None:
                scope.func.returns.append(stmt.value)

    def stmt_Import(self, stmt: Union[ast.Import, ast.ImportFrom], scope: Scope, at: At) -> None:
        if scope is not self.module:
            imports_of([stmt], scope.aliases)

    stmt_ImportFrom = stmt_Import

    # ----- bindings -------------------------------------------------------------------------------------------
    def bind_loop(self, stmt: Union[ast.For, ast.AsyncFor], scope: Scope) -> None:
        """`for k, v in ENV.items()`: remember which keys `k` takes (for `os.environ[k] = v`)."""
        target, source = stmt.target, stmt.iter
        first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else None
        if isinstance(first, ast.Name) and isinstance(source, ast.Call) and isinstance(source.func, ast.Attribute) \
                and source.func.attr == "items":
            mapping = dict_literal(source.func.value, scope)
            if mapping is not None:
                scope.loopkeys[first.id] = {k.value for k in mapping.keys if isinstance(k, ast.Constant)}

    def bind(self, name: str, value: Optional[ast.expr], scope: Scope) -> None:
        scope.exprs[name] = value if value is not None else ast.Constant(None)
        scope.assigned[name] = scope.assigned.get(name, 0) + 1
        found = self.values.value_of(value, scope) if value is not None else None
        if found is None and value is not None and self.values.cuda_like(value, scope):
            found = Val("cuda_device")
        if found is not None:
            scope.values[name] = found
        else:
            scope.values.pop(name, None)

    def assign(self, target: ast.expr, value: Optional[ast.expr], stmt: ast.stmt, scope: Scope, at: At,
               augmented: bool = False) -> None:
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
                found = self.values.value_of(value, scope)
                if found is not None:
                    scope.klass.attrs[target.attr] = found
        elif isinstance(target, ast.Subscript):
            if qualified(target.value, scope) == "os.environ" and names_cvd(target.slice, scope):
                self.trace.event(at, "cvd", stmt, what=segment(self.lines, stmt, 80))

    # ----- expressions ----------------------------------------------------------------------------------------
    def walk_expr(self, expr: ast.AST, scope: Scope, at: At) -> None:
        for node in self.index.postorder(expr):
            if isinstance(node, ast.Call):
                self.calls.call(node, scope, at)
            elif isinstance(node, ast.comprehension):
                for loader in self.values.iterated(node.iter, scope):
                    self.calls.loader_iterated(loader, node.iter, "in a comprehension", at)
            elif isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                self.bind(node.target.id, node.value, scope)
