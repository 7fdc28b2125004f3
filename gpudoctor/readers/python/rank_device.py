"""A global rank used as a CUDA device index (`torch.cuda.set_device(dist.get_rank())`, `f"cuda:{rank}"` with
`rank = int(os.environ["RANK"])`): right on one node, where RANK equals LOCAL_RANK, and "invalid device ordinal" on
the second, whose ranks start at the GPUs of one node. Found statically; the script is never run."""

from __future__ import annotations

import ast
from typing import Callable, Dict, List, Optional

from gpudoctor.readers.python.names import literal, segment
from gpudoctor.readers.python.tree import Tree

GET_RANK = {"torch.distributed.get_rank", "torch.distributed.distributed_c10d.get_rank"}
GLOBAL_RANK_VARIABLES = {"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}
ENV_READS = {"os.environ.get", "os.getenv", "os.environ.__getitem__"}
SET_DEVICE = {"torch.cuda.set_device", "torch.cuda.device"}


class _Finder:
    def __init__(self, tree: Tree, lines: List[str], qualified: Callable[[ast.AST], str]):
        self.index, self.tree, self.lines, self.qualified = tree, tree.module, lines, qualified
        self.ranks: Dict[str, str] = {}  # a name bound to the global rank → where it comes from

    def source(self, node: Optional[ast.AST]) -> Optional[str]:
        """`dist.get_rank()` / `RANK` / … when the expression is the global rank itself (int(), str() around it)."""
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "str") \
                and node.args:
            node = node.args[0]
        if isinstance(node, ast.Name):
            return self.ranks.get(node.id)
        if isinstance(node, ast.Call):
            name = self.qualified(node.func)
            if name in GET_RANK:
                return "dist.get_rank()"
            if name in ENV_READS and node.args and literal(node.args[0]) in GLOBAL_RANK_VARIABLES:
                return literal(node.args[0])
        if isinstance(node, ast.Subscript) and self.qualified(node.value) == "os.environ" \
                and literal(node.slice) in GLOBAL_RANK_VARIABLES:
            return literal(node.slice)
        return None

    def bind_ranks(self, scope: ast.AST, inherited: Dict[str, str]) -> None:
        """The names this scope assigns the global rank (`rank = dist.get_rank()`); a parameter of a function
        shadows a module-level name (`def worker(rank, …)` under mp.spawn is a local index)."""
        self.ranks = dict(inherited)
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for arg in scope.args.args + scope.args.kwonlyargs + scope.args.posonlyargs:
                self.ranks.pop(arg.arg, None)
        for _ in range(2):
            for node in self.index.postorder(scope):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    found = self.source(node.value)
                    if found:
                        self.ranks[node.targets[0].id] = found

    def device_of(self, node: ast.AST) -> Optional[str]:
        """The global-rank source of a device expression: the rank itself, `f"cuda:{rank}"`, `"cuda:%d" % rank`,
        `torch.device("cuda", rank)`."""
        if isinstance(node, ast.JoinedStr):
            texts = [v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
            values = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
            if len(values) == 1 and "".join(texts).strip() == "cuda:":
                return self.source(values[0])
            return None
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod)
                and literal(node.left) in ("cuda:%d", "cuda:%s")):
            return self.source(node.right)
        if isinstance(node, ast.Call) and self.qualified(node.func) == "torch.device":
            if len(node.args) == 2 and literal(node.args[0]) == "cuda":
                return self.source(node.args[1])
            return self.device_of(node.args[0]) if node.args else None
        return self.source(node)

    def uses(self) -> List[dict]:
        if not any("get_rank" in line for line in self.lines) and not any(
                isinstance(n, ast.Constant) and n.value in GLOBAL_RANK_VARIABLES for n in self.index.walk()):
            return []  # no global rank anywhere
        found: Dict[int, dict] = {}
        self.bind_ranks(self.tree, {})
        module = dict(self.ranks)
        scopes = [self.tree] + [n for n in self.index.walk() if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            self.bind_ranks(scope, module if scope is not self.tree else {})
            for node in self.index.postorder(scope):
                if isinstance(node, ast.Call) and node.lineno not in found:
                    entry = self.device_call(node)
                    if entry:
                        found[node.lineno] = entry
        return [found[line] for line in sorted(found)]

    def device_call(self, node: ast.Call) -> Optional[dict]:
        """`set_device(rank)`, `torch.device(…)`, `.to(…)`/`.cuda(…)`, `device=`/`output_device=`/`device_ids=[…]`."""
        name = self.qualified(node.func)
        candidates: List[ast.expr] = []
        if name == "torch.device":
            candidates = [node]
        elif name in SET_DEVICE or isinstance(node.func, ast.Attribute) and node.func.attr in ("cuda", "to"):
            candidates = node.args[:1]
        candidates += [kw.value for kw in node.keywords if kw.arg in ("device", "output_device")]
        ids = next((kw.value for kw in node.keywords if kw.arg == "device_ids"), None)
        if isinstance(ids, (ast.List, ast.Tuple)) and len(ids.elts) == 1:
            candidates.append(ids.elts[0])
        for candidate in candidates:
            source = self.device_of(candidate)
            if source:
                return {"line": node.lineno, "what": segment(self.lines, node, 70), "rank": source}
        return None


def global_rank_devices(tree: Tree, lines: List[str], qualified: Callable[[ast.AST], str]) -> List[dict]:
    """Each call that makes a global rank a CUDA device: `{"line", "what", "rank"}` (`rank`: `RANK`,
    `dist.get_rank()`, `SLURM_PROCID` …)."""
    return _Finder(tree, lines, qualified).uses()
