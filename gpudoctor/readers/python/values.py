"""What an expression of the script stands for: one of its functions or classes, an imported name (`resolve`), or
an abstract value the rules care about (`value_of`): a process, a start-method context, a DataLoader with its
workers, a Lightning Trainer or Fabric and its strategy, a Hugging Face Trainer, a thread, a CUDA device."""

from __future__ import annotations

import ast
from typing import List, Optional, Tuple

from gpudoctor.readers.python.constants import argument, const
from gpudoctor.readers.python.known_calls import BUILTIN_NAMES, SPAWN_METHODS, WRAPPERS, call_kind
from gpudoctor.readers.python.names import NO_VALUE, canonical, dotted, literal, segment
from gpudoctor.readers.python.scopes import MAX_CALL_DEPTH, Func, Klass, Resolved, Scope, Summaries, Val, qualified
from gpudoctor.readers.python.workers import LoaderWorkers


class Values:
    """Resolves names and values in one script (`lines`: its source); a function's returned value is read from
    its walk, which `summaries` makes on first use."""

    def __init__(self, lines: List[str], workers: LoaderWorkers, summaries: Summaries):
        self.lines = lines
        self.workers = workers
        self.summaries = summaries

    # ----- names ----------------------------------------------------------------------------------------------
    def resolve(self, node: ast.AST, scope: Scope) -> Resolved:
        """A local Func or Klass, or a qualified name (str), or None."""
        if isinstance(node, ast.Name):
            return self.resolve_name(node, scope)
        if isinstance(node, ast.Attribute):
            return self.resolve_attribute(node, scope)
        return None

    def resolve_name(self, node: ast.Name, scope: Scope) -> Resolved:
        for level in scope.chain():
            if node.id in level.functions:
                return level.functions[node.id]
            if node.id in level.classes:
                return level.classes[node.id]
            if node.id in level.aliases:
                return canonical(level.aliases[node.id])
            if level.bound_here(node.id):
                return None
        return node.id if node.id in BUILTIN_NAMES else None

    def resolve_attribute(self, node: ast.Attribute, scope: Scope) -> Resolved:
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
        return qualified(node, scope)

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
        kind = call_kind(target) if isinstance(target, str) else None
        return getattr(self, f"made_{kind}")(call, target, scope, depth) if kind else None

    def returned(self, func: Func, scope: Scope, depth: int) -> Optional[Val]:
        """The first value the function is seen to return."""
        if func.events is None and self.summaries.depth < MAX_CALL_DEPTH:
            self.summaries.summary(func)
        for ret in func.returns:
            value = self.value_of(ret, func.scope or scope, depth + 1)
            if value is not None:
                return value
        return None

    # the values known library calls make, by the kind known_calls.call_kind gives them
    def made_mp_context(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        method = const(call.args[0], scope) if call.args else NO_VALUE
        return Val("mp_context", {"method": method if isinstance(method, str) else "default"})

    def made_process(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        return Val("process", {"call": target, "method": "default", "line": call.lineno})

    def made_dataloader(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        workers, note = self.workers.of(call, scope)
        return Val("dataloader", {"workers": workers, "workers_note": note,
                                  "method": self.context_method(argument(call, "multiprocessing_context", 11), scope),
                                  "line": call.lineno, "what": segment(self.lines, call, 70)})

    def made_lightning(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        spawn, method = self.lightning_spawn(call, scope)
        kind = "fabric" if target == "lightning.Fabric" else "lightning"
        return Val(kind, {"spawn": spawn, "method": method, "line": call.lineno, "what": segment(self.lines, call, 70)})

    def made_hf_trainer(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        value = self.value_of(argument(call, "args", 1), scope, depth + 1)
        workers = value.data.get("workers") if value is not None and value.kind == "hf_args" else None
        return Val("hf_trainer", {"workers": workers, "line": call.lineno, "name": target})

    def made_hf_args(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        workers = const(argument(call, "dataloader_num_workers", None), scope)
        return Val("hf_args", {"workers": workers if isinstance(workers, int) else None, "line": call.lineno})

    def made_thread(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Val:
        return Val("thread", {"target": argument(call, "target", 1)})

    def made_device(self, call: ast.Call, target: str, scope: Scope, depth: int) -> Optional[Val]:
        return Val("cuda_device") if call.args and self.cuda_like(call.args[0], scope) else None

    def context_method(self, node: Optional[ast.AST], scope: Scope) -> str:
        """The start method a `mp_context=`/`multiprocessing_context=` argument names ("default" when not known)."""
        if node is None:
            return "default"
        value = const(node, scope)
        if isinstance(value, str):
            return value
        ctx = self.value_of(node, scope)
        if ctx is not None and ctx.kind == "mp_context":
            return ctx.data["method"]
        return "default"

    def lightning_spawn(self, call: ast.Call, scope: Scope) -> Tuple[Optional[bool], str]:
        """Whether a Lightning Trainer/Fabric uses a spawn-based strategy, and the start method."""
        for name in ("strategy", "accelerator", "distributed_backend"):
            node = argument(call, name, None)
            if node is None:
                continue
            value = const(node, scope)
            if isinstance(value, str):
                text = value.lower()
                if "spawn" in text:
                    return True, "spawn"
                if text in ("ddp_fork", "ddp_notebook") or text.startswith(("ddp_fork", "ddp_notebook")):
                    return False, "fork"
                continue
            if isinstance(node, ast.Call):
                strategy = qualified(node.func, scope) or ""
                short = strategy.rsplit(".", 1)[-1]
                if "Spawn" in short:
                    return True, "spawn"
                start = const(argument(node, "start_method", None), scope)
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
            if qualified(node.func, scope) == "torch.device" and node.args:
                return self.cuda_like(node.args[0], scope, depth + 1)
            return False
        found = self.value_of(node, scope)
        return found is not None and found.kind == "cuda_device"

    def iterated(self, node: ast.AST, scope: Scope, depth: int = 0) -> List[Val]:
        """The DataLoaders that iterating `node` iterates (through enumerate/zip/tqdm/iter…); a parameter of the
        function walked stands for the DataLoader a caller passes."""
        if depth > 4:
            return []
        value = self.value_of(node, scope)
        if value is not None and value.kind == "dataloader":
            return [value]
        if value is None and isinstance(node, ast.Name) and scope.func is not None and node.id in scope.params:
            return [Val("param", {"name": node.id})]  # the caller's argument decides (see Walker.replay)
        if isinstance(node, ast.Call):
            name = qualified(node.func, scope) or dotted(node.func) or ""
            if name in WRAPPERS or name.rsplit(".", 1)[-1] in ("tqdm", "enumerate", "zip"):
                found: List[Val] = []
                for arg in node.args:
                    found.extend(self.iterated(arg, scope, depth + 1))
                return found
        return []
