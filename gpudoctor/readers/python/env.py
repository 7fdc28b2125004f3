"""Python launchers: environment variables a script sets or hands to the processes it launches. Parsed with `ast`,
never imported or run.

Found: `os.environ["X"] = "v"`, `os.environ.update({...})` / `.update(X="v")`, `os.environ.setdefault("X", "v")`
(conditional: only when unset), `os.putenv("X", "v")`, and dicts of variables given to launchers:
`env=`/`env_vars=`/`environment=`/`extra_env=` keyword arguments (`subprocess.run(..., env={...})`,
`run.SlurmExecutor(env_vars={...})`, Ray `runtime_env={"env_vars": {...}}`), `env_vars = {...}`-style assignments
(any target whose name contains "env"), `executor.env_vars.update({...})` / `executor.env_vars["X"] = "v"`, and any
dict literal whose keys are all variable names with at least one NCCL/torch/CUDA one. Each dict is its own scope
(two executors with different values are not a conflict). A value that is not a literal (an f-string, a name, a
call) is unknown and kept verbatim. Code inside branches and loops is marked conditional.
"""

from __future__ import annotations

import ast
from typing import Dict, List, Set, Tuple

from gpudoctor.readers.env import Assignment, ReadResult, is_env_name
from gpudoctor.readers.python.tree import Tree
from gpudoctor.redact import cut

ENV_KEYWORDS = {"env", "env_vars", "envs", "environment", "extra_env", "env_variables", "environment_variables",
                "extra_env_vars", "envvars"}
HINT_PREFIXES = ("NCCL_", "TORCH_", "CUDA_", "FI_", "GLOO_", "PYTORCH_", "NVTE_", "OMP_", "DS_", "NVIDIA_", "UCX_")
# Code in a branch may not run (conditional). Function bodies are not: launchers keep their env dicts in functions.
BRANCHES: Tuple[type, ...] = (ast.If, ast.For, ast.While, ast.Try, ast.AsyncFor, ast.IfExp, ast.comprehension)
if hasattr(ast, "TryStar"):  # Python 3.11+
    BRANCHES = BRANCHES + (ast.TryStar,)


def _unparse(node) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - unparse of odd trees; the text is only shown
        return "<expression>"


# the methods of os.environ (and of env-like dicts) that set variables, and the Finder method that reads each call
ENV_METHODS = {"update": "call_update", "setdefault": "call_setdefault", "putenv": "call_putenv"}


class Finder:
    """Visits the nodes of the file's one walk (Tree.visit): `enter_<Kind>` reads a node before the nodes under it;
    code under a branch is conditional, code under a function is that function's run."""

    def __init__(self, path: str, result: ReadResult, aliases: Dict[str, str]):
        self.path = path
        self.result = result
        self.environ_names = {name for name, target in aliases.items() if target == "os.environ"}
        self.os_names = {"os"} | {name for name, target in aliases.items() if target == "os"}
        self.depth = 0
        self.seen_dicts: Set[int] = set()
        self.function = ""  # os.environ assignments of different functions are different runs
        self.functions: List[str] = []  # the enclosing functions' names, innermost last
        self.bindings: dict = {}  # `env = base.copy()` again: a new dict, so its items are a new environment

    # -- helpers --------------------------------------------------------------------------------------
    def is_environ(self, node) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "environ":
            return isinstance(node.value, ast.Name) and node.value.id in self.os_names
        return isinstance(node, ast.Name) and node.id in self.environ_names

    def add(self, key_node, value_node, scope: str, context: str, conditional: bool = False) -> None:
        if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
            return
        name = key_node.value
        if not is_env_name(name):
            return
        if name != name.upper() and ":os.environ" not in scope:
            return  # a lowercase key of some dict: its consumer may upper-case it (accelerate's patch_environment)
        value, reason = self.value(value_node)
        self.result.assignments.append(Assignment(
            name, value, self.path, getattr(key_node, "lineno", None), reason, conditional or self.depth > 0,
            scope, context))

    @staticmethod
    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool)):
            return str(node.value), None
        constants = [v for v in node.values if isinstance(v, ast.Constant)] if isinstance(node, ast.JoinedStr) else []
        if isinstance(node, ast.JoinedStr) and len(constants) == len(node.values):
            return "".join(str(v.value) for v in constants), None
        return _unparse(node), f"Python expression `{cut(_unparse(node), 60)}` evaluated when the script runs"

    def dict_literal(self, node: ast.Dict, context: str, conditional: bool = False) -> None:
        if id(node) in self.seen_dicts:
            return
        self.seen_dicts.add(id(node))
        scope = f"{self.path}:dict@{node.lineno}"
        for key, value in zip(node.keys, node.values):
            if key is None:
                continue  # **other
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value == "env_vars" \
                    and isinstance(value, ast.Dict):
                self.dict_literal(value, context, conditional)
                continue
            self.add(key, value, scope, context, conditional)

    def env_container(self, node, context: str, conditional: bool = False) -> None:
        """A value that should hold variables: a dict literal or dict(...) call."""
        if isinstance(node, ast.Dict):
            self.dict_literal(node, context, conditional)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
                and id(node) not in self.seen_dicts:
            self.seen_dicts.add(id(node))
            scope = f"{self.path}:dict@{node.lineno}"
            for keyword in node.keywords:
                if keyword.arg:
                    key = ast.Constant(keyword.arg)
                    key.lineno = keyword.value.lineno
                    self.add(key, keyword.value, scope, context, conditional)
            for arg in node.args:
                self.env_container(arg, context, conditional)

    # -- visitors -------------------------------------------------------------------------------------
    def enter(self, node) -> None:
        handler = getattr(self, "enter_" + type(node).__name__, None)
        if handler is not None:
            handler(node)
        self.depth += isinstance(node, BRANCHES)

    def leave(self, node) -> None:
        self.depth -= isinstance(node, BRANCHES)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.function = self.functions.pop()

    def enter_FunctionDef(self, node) -> None:
        self.functions.append(self.function)
        self.function = f"@{node.name}:{node.lineno}"

    enter_AsyncFunctionDef = enter_FunctionDef

    def enter_Assign(self, node) -> None:
        for target in node.targets:
            self.target(target, node.value)

    def enter_AnnAssign(self, node) -> None:
        if node.value is not None:
            self.target(node.target, node.value)

    def enter_AugAssign(self, node) -> None:
        if isinstance(node.op, ast.BitOr):
            self.target(node.target, node.value)

    def target(self, target, value) -> None:
        if isinstance(target, ast.Subscript):
            index = getattr(ast, "Index", None)  # Python 3.8 wrapped subscripts in ast.Index
            key = target.slice.value if index is not None and isinstance(target.slice, index) else target.slice
            if self.is_environ(target.value):
                self.add(key, value, f"{self.path}:os.environ{self.function}", "os.environ")
            elif self._envish(target.value):
                shown = _unparse(target.value)
                self.add(key, value, f"{self.path}:{shown}{self.function}#{self.bindings.get(shown, 0)}", shown)
            elif isinstance(value, (ast.Dict, ast.Call)) and isinstance(key, ast.Constant) \
                    and isinstance(key.value, str) and "env" in key.value.lower():
                self.env_container(value, f"{_unparse(target)}")
        elif self._envish(target):
            self.bindings[_unparse(target)] = self.bindings.get(_unparse(target), 0) + 1
            self.env_container(value, _unparse(target))

    @staticmethod
    def _envish(node) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return "env" in name.lower() and name != "environ"

    def enter_Call(self, node) -> None:
        """os.environ.update/setdefault, os.putenv and env-like dicts' update (dispatched through ENV_METHODS),
        dict(NCCL_…=…), and env=/runtime_env= keywords of any call."""
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in ENV_METHODS:
            getattr(self, ENV_METHODS[func.attr])(node, func)
        elif isinstance(func, ast.Name) and func.id == "dict" and node.keywords:
            names = [k.arg for k in node.keywords]
            if all(n and is_env_name(n) and n.upper() == n for n in names) and any(
                    n.startswith(HINT_PREFIXES) for n in names):
                self.env_container(node, "dict of environment variables")
        for keyword in node.keywords:
            if keyword.arg in ENV_KEYWORDS:
                self.env_container(keyword.value, f"{keyword.arg}= of {_unparse(func)[:40]}()")
            elif keyword.arg == "runtime_env" and isinstance(keyword.value, ast.Dict):
                self.dict_literal_runtime(keyword.value, _unparse(func)[:40])

    def call_update(self, node: ast.Call, func: ast.Attribute) -> None:
        if not self.is_environ(func.value):
            if self._envish(func.value):
                for arg in node.args:
                    self.env_container(arg, f"{_unparse(func.value)}.update")
            return
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                self.dict_literal(arg, "os.environ.update", False)
        for keyword in node.keywords:
            if keyword.arg:
                key = ast.Constant(keyword.arg)
                key.lineno = keyword.value.lineno
                self.add(key, keyword.value, f"{self.path}:os.environ{self.function}", "os.environ.update")

    def call_setdefault(self, node: ast.Call, func: ast.Attribute) -> None:
        if self.is_environ(func.value) and len(node.args) >= 2:
            self.add(node.args[0], node.args[1], f"{self.path}:os.environ{self.function}",
                     "os.environ.setdefault (only "
                     "when not already set)", conditional=True)

    def call_putenv(self, node: ast.Call, func: ast.Attribute) -> None:
        if isinstance(func.value, ast.Name) and func.value.id in self.os_names and len(node.args) >= 2:
            self.add(node.args[0], node.args[1], f"{self.path}:os.environ{self.function}", "os.putenv")

    def dict_literal_runtime(self, node: ast.Dict, func: str) -> None:
        for key, value in zip(node.keys, node.values):
            if isinstance(key, ast.Constant) and key.value == "env_vars":
                self.env_container(value, f"runtime_env of {func}()")

    def enter_Dict(self, node) -> None:
        keys = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if keys and len(keys) == len(node.keys) and all(is_env_name(k) and k.upper() == k for k in keys) \
                and any(k.startswith(HINT_PREFIXES) for k in keys):
            self.dict_literal(node, "dict of environment variables")


def read(tree: Tree, path: str, aliases: Dict[str, str]) -> ReadResult:
    """Env assignments of a parsed Python file, from its one walk (`aliases`: its imports, names.module_aliases)."""
    result = ReadResult()
    try:
        tree.visit(Finder(path, result, aliases))
    except RecursionError:  # an expression too deep to unparse
        result.error("Python code nested too deeply to analyse")
    return result
