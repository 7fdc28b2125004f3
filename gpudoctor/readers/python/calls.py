"""What a call in the script does when it runs: starts processes (a spawn, a Pool, a Process's `start()`, a
Trainer's `fit()` with a spawn strategy or DataLoader workers), may initialise CUDA, sets CUDA_VISIBLE_DEVICES,
sets the start method, runs a nemo_run recipe, or enters one of the script's own functions (replayed from its
walk)."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Protocol

from gpudoctor.readers.env import CVD
from gpudoctor.readers.python.constants import argument, const, dict_literal
from gpudoctor.readers.python.events import At, Located, Trace
from gpudoctor.readers.python.known_calls import (
    CALLS_ITS_ARGUMENT,
    CONSUMERS,
    HF_RUNS,
    LIGHTNING_RUNS,
    STARTERS,
    initialises_cuda,
)
from gpudoctor.readers.python.names import segment
from gpudoctor.readers.python.recipes import Recipes
from gpudoctor.readers.python.scopes import Func, Klass, Resolved, Scope, Val
from gpudoctor.readers.python.values import Values


class Replays(Protocol):
    """The walk as a call sees it: a function's events replayed where it is called."""

    def replay(self, func: Func, line: int, at: At, call: Optional[ast.Call] = None,
               scope: Optional[Scope] = None) -> None: ...


class Calls:
    """Records the events of the calls of one script (`lines`: its source; `registry`: decorator root name ->
    the functions it registers, which calling the root runs)."""

    def __init__(self, lines: List[str], values: Values, recipes: Recipes, trace: Trace, walk: Replays,
                 registry: Dict[str, List[Func]]):
        self.lines = lines
        self.values = values
        self.recipes = recipes
        self.trace = trace
        self.walk = walk
        self.registry = registry

    def call(self, call: ast.Call, scope: Scope, at: At) -> None:
        func = call.func
        line = call.lineno
        if isinstance(func, ast.Attribute):
            owner = self.values.value_of(func.value, scope)
            if owner is not None:
                self.method_call(owner, func.attr, call, scope, at)
        target = self.values.resolve(func, scope)
        if isinstance(target, Func):
            self.walk.replay(target, line, at, call, scope)
        elif isinstance(target, Klass):
            init = target.method("__init__")
            if init is not None:
                self.walk.replay(init, line, at, call, scope)
        elif isinstance(target, str):
            self.library_call(target, call, scope, at)
        if isinstance(func, ast.Name) and func.id in self.registry and not isinstance(target, Klass):
            for registered in self.registry[func.id]:  # `app()` of a typer/click app runs its commands
                self.walk.replay(registered, line, at)
        self.cuda_call(call, target, scope, at)

    def method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        """`owner.attr(…)` on a value the walk knows (a process, a Trainer …), dispatched by the value's kind."""
        method = {"mp_context": self.context_method_call, "process": self.process_method_call,
                  "thread": self.thread_method_call, "lightning": self.lightning_method_call,
                  "fabric": self.fabric_method_call, "hf_trainer": self.hf_trainer_method_call}.get(owner.kind)
        if method is not None:
            method(owner, attr, call, scope, at)

    def context_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        if attr in ("Pool", "Manager"):
            self.trace.event(at, "start", call, call=f"multiprocessing.{attr}",
                             what=segment(self.lines, call, 80), method=owner.data["method"])

    def process_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        if attr == "start":
            self.trace.event(at, "start", call, call=owner.data["call"],
                             what=f"{owner.data['call']}(…).start()", method=owner.data["method"])

    def thread_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        target = owner.data.get("target")
        func = self.values.resolve(target, scope) if attr == "start" and target is not None else None
        if isinstance(func, Func):
            self.walk.replay(func, call.lineno, at)

    def lightning_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        if attr not in LIGHTNING_RUNS:
            return
        if owner.data.get("spawn"):
            self.trace.event(at, "start", call, call="lightning.Trainer." + attr,
                             what=f"trainer.{attr}() with a spawn strategy ({owner.data['what']}, line "
                                  f"{owner.data['line']})", method=owner.data["method"])
        for arg in list(call.args) + [kw.value for kw in call.keywords]:
            for loader in self.values.iterated(arg, scope):
                self.loader_iterated(loader, call, f"by trainer.{attr}()", at)

    def fabric_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        if attr == "launch" and owner.data.get("spawn"):
            self.trace.event(at, "start", call, call="lightning.Fabric.launch",
                             what=f"fabric.launch() with a spawn strategy ({owner.data['what']})",
                             method=owner.data["method"])

    def hf_trainer_method_call(self, owner: Val, attr: str, call: ast.Call, scope: Scope, at: At) -> None:
        workers = owner.data.get("workers")
        if attr in HF_RUNS and isinstance(workers, int) and workers > 0:
            self.trace.event(at, "start", call, call=f"{owner.data['name']}.{attr}",
                             what=f"trainer.{attr}() with dataloader_num_workers={workers}: its DataLoader starts "
                                  f"{workers} worker processes", method="default")

    def library_call(self, name: str, call: ast.Call, scope: Scope, at: At) -> None:
        if name in STARTERS:
            method = STARTERS[name]
            if name == "torch.multiprocessing.start_processes":
                chosen = const(argument(call, "start_method", 4), scope)
                method = chosen if isinstance(chosen, str) else method
            elif name == "concurrent.futures.ProcessPoolExecutor":
                method = self.values.context_method(argument(call, "mp_context", 1), scope)
            self.trace.event(at, "start", call, call=name, what=segment(self.lines, call, 80),
                             method=method)
            if name == "nemo_run.run":
                self.trace.event(at, "nemo", call, **self.recipes.run_info(call, scope))
        if name == "multiprocessing.set_start_method":
            method = const(call.args[0] if call.args else argument(call, "method", None), scope)
            if isinstance(method, str):
                self.trace.event(at, "method", call, method=method)
        elif name in CALLS_ITS_ARGUMENT and call.args:
            func = self.values.resolve(call.args[0], scope)
            if isinstance(func, Func):
                self.walk.replay(func, call.lineno, at)
        elif name in CONSUMERS:
            for arg in call.args:
                for loader in self.values.iterated(arg, scope):
                    self.loader_iterated(loader, call, f"by {name}()", at)
        elif name in ("os.environ.update", "os.environ.setdefault", "os.putenv"):
            if self.sets_cvd(name, call, scope):
                self.trace.event(at, "cvd", call, what=segment(self.lines, call, 80))

    def sets_cvd(self, name: str, call: ast.Call, scope: Scope) -> bool:
        if name == "os.environ.update":
            if any(kw.arg == CVD for kw in call.keywords):
                return True
            for arg in call.args:
                mapping = dict_literal(arg, scope)
                if mapping is not None and any(const(k, scope) == CVD for k in mapping.keys if k is not None):
                    return True
            return False
        return bool(call.args) and names_cvd(call.args[0], scope)

    def cuda_call(self, call: ast.Call, target: Resolved, scope: Scope, at: At) -> None:
        """Record the first statement that may initialise CUDA (per function walk: one is enough)."""
        what = self.cuda_initialiser(call, target, scope)
        if what:
            self.trace.event(at, "cuda", call, what=what)

    def cuda_initialiser(self, call: ast.Call, target: Resolved, scope: Scope) -> Optional[str]:
        """The call, written short, where it may initialise CUDA: a torch.cuda function that does, `x.cuda()`,
        `x.to("cuda")`, a `device=` on the GPU or a `device_map=` (but "cpu", "meta")."""
        if isinstance(target, str) and target.startswith("torch.cuda."):
            return f"{target}()" if initialises_cuda(target) else None
        func = call.func
        method = func.attr if isinstance(func, ast.Attribute) and target is None else None
        if method == "cuda" and isinstance(func, ast.Attribute):
            return f"{segment(self.lines, func.value, 30)}.cuda()"
        cuda_like = self.values.cuda_like
        if method == "to" and ((call.args and cuda_like(call.args[0], scope))
                               or cuda_like(argument(call, "device", None), scope)):
            return segment(self.lines, call, 60)
        on_gpu = any(kw.arg == "device" and cuda_like(kw.value, scope) and not (
                         isinstance(target, str) and target == "torch.device")
                     or kw.arg == "device_map" and const(kw.value, scope) not in (None, "cpu", "meta")
                     for kw in call.keywords)
        return segment(self.lines, call, 60) if on_gpu else None

    def loader_iterated(self, loader: Val, node: Located, how: str, at: At) -> None:
        """A DataLoader iterated at `node` (`how`, in words): a start of its workers, where it has any; for a
        parameter, an event the caller's replay turns into the DataLoader it passes."""
        if loader.kind == "param":
            self.trace.event(at, "param_iter", node, param=loader.data["name"], how=how,
                             call=f"parameter {loader.data['name']}")  # zip(a, b): one event per parameter
            return
        workers = loader.data.get("workers")
        if not isinstance(workers, int) or workers <= 0:
            return
        note = loader.data.get("workers_note")
        self.trace.event(at, "start", node, call="torch.utils.data.DataLoader",
                         what=f"iterating the DataLoader of line {loader.data['line']} (num_workers={workers}"
                              f"{', ' + note if note else ''}) {how}",
                         method=loader.data.get("method", "default"))


def names_cvd(key: ast.AST, scope: Scope) -> bool:
    """Whether an `os.environ[key]` key is CUDA_VISIBLE_DEVICES (also a loop variable that takes it)."""
    if const(key, scope) == CVD:
        return True
    if isinstance(key, ast.Name):
        keys = scope.lookup("loopkeys", key.id)
        return bool(keys) and CVD in keys
    return False
