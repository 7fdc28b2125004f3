"""What a nemo_run `run.run(recipe, executor=…, direct=…)` call asks for, where the script says it: the devices
and nodes of its recipe (set on the recipe, passed to the recipe's factory, or returned by the script's own
factory), whether it runs directly, and the kind of its executor."""

from __future__ import annotations

import ast
from typing import Any, Dict, Optional, Tuple

from gpudoctor.readers.python.constants import argument, call_bindings, const
from gpudoctor.readers.python.scopes import Func, Scope, Summaries
from gpudoctor.readers.python.values import Values

Devices = Tuple[Any, Any, Optional[str]]  # (devices, num_nodes, evidence), each None where it cannot be known


class Recipes:
    def __init__(self, values: Values, summaries: Summaries):
        self.values = values
        self.summaries = summaries

    def run_info(self, call: ast.Call, scope: Scope) -> Dict[str, Any]:
        """The `nemo` event's data of a `run.run(...)` call."""
        direct_node = argument(call, "direct", None)
        direct = const(direct_node, scope) if direct_node is not None else False
        info: Dict[str, Any] = {"direct": direct if isinstance(direct, bool) else None,
                                "direct_given": direct_node is not None,
                                "devices": None, "num_nodes": None, "evidence": None, "executor": None}
        executor = argument(call, "executor", 1)
        if executor is not None:
            info["executor"] = self.executor_kind(executor, scope)
        recipe = call.args[0] if call.args else argument(call, "fn_or_script", None)
        if recipe is not None:
            devices, nodes, evidence = self.devices(recipe, scope, 0)
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
            target = self.values.resolve(node.func, scope)
            if isinstance(target, str):
                return "local" if target.endswith("LocalExecutor") else target.rsplit(".", 1)[-1]
            if isinstance(target, Func):
                self.summaries.summary(target)
                for ret in target.returns:
                    kind = self.executor_kind(ret, target.scope or scope, depth + 1)
                    if kind != "unknown":
                        return kind
        return "unknown"

    def devices(self, node: ast.AST, scope: Scope, depth: int) -> Devices:
        """(devices, num_nodes, evidence) that a nemo_run recipe expression asks for, where they can be known."""
        if depth > 4:
            return None, None, None
        if isinstance(node, ast.Name):
            return self.named_devices(node, scope, depth)
        if isinstance(node, ast.Call):
            return self.made_devices(node, scope, depth)
        return None, None, None

    def named_devices(self, node: ast.Name, scope: Scope, depth: int) -> Devices:
        """`recipe.trainer.devices = 8` and `recipe.trainer.num_nodes = 2` where the script sets them, else what
        the expression bound to the name asks for."""
        devices = nodes = evidence = None
        for level in scope.chain():
            assigned = level.attrs.get((node.id, "trainer.devices"))
            value = const(assigned[0], level) if assigned is not None and devices is None else None
            if isinstance(value, int) and assigned is not None:
                devices, evidence = value, f"{node.id}.trainer.devices = {value} (line {assigned[1]})"
            assigned = level.attrs.get((node.id, "trainer.num_nodes"))
            value = const(assigned[0], level) if assigned is not None and nodes is None else None
            if isinstance(value, int):
                nodes = value
            if node.id in level.exprs:
                if devices is None or nodes is None:
                    sub_devices, sub_nodes, sub_evidence = self.devices(level.exprs[node.id], level, depth + 1)
                    if devices is None and sub_devices is not None:
                        devices, evidence = sub_devices, sub_evidence
                    nodes = sub_nodes if nodes is None else nodes
                break
        return devices, nodes, evidence

    def made_devices(self, node: ast.Call, scope: Scope, depth: int) -> Devices:
        """A recipe made by a call: what the script's own factory returns (its arguments bound), or the call's
        `num_gpus_per_node`/`devices` and `num_nodes`."""
        target = self.values.resolve(node.func, scope)
        if isinstance(target, Func):
            return self.returned_devices(target, node, scope, depth)
        devices = nodes = evidence = None
        for kw in node.keywords:
            value = const(kw.value, scope) if kw.arg in ("num_gpus_per_node", "devices", "num_nodes") else None
            if isinstance(value, int) and kw.arg == "num_nodes":
                nodes = value
            elif isinstance(value, int):
                devices, evidence = value, f"{kw.arg}={value} (line {kw.value.lineno})"
        return devices, nodes, evidence

    def returned_devices(self, target: Func, node: ast.Call, scope: Scope, depth: int) -> Devices:
        self.summaries.summary(target)
        fscope = target.scope
        if fscope is None:
            return None, None, None
        saved = dict(fscope.bindings)
        fscope.bindings.update(call_bindings(target, node, scope))
        try:
            for ret in target.returns:
                sub = self.devices(ret, fscope, depth + 1)
                if sub[0] is not None or sub[1] is not None:
                    return sub
        finally:
            fscope.bindings = saved
        return None, None, None
