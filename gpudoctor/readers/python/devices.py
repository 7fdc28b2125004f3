"""Where a script spreads its work over several GPUs from one process: a `device_map` other than one device
(Hugging Face's "auto"/"balanced" or a map), a count of the GPUs (`torch.cuda.device_count()`), a device index other
than 0 (`"cuda:1"`, `f"cuda:{i}"`, `torch.device("cuda", i)`), a tensor- or pipeline-parallel size (vLLM and its
kind). A script with none of these, no torch.distributed and no DataParallel drives one GPU (GD904)."""

from __future__ import annotations

import ast
import re
from typing import Callable, List, cast

from gpudoctor.readers.python.names import literal, segment
from gpudoctor.readers.python.tree import Tree

ONE_DEVICE = {None, "cpu", "meta", "cuda", "cuda:0", 0, "0"}  # device_map values that place the model on one device
PARALLEL_SIZES = {"tensor_parallel_size", "pipeline_parallel_size", "tp_size", "pp_size"}
OTHER_INDEX = re.compile(r"^cuda:(?:[1-9]\d*)$")  # a literal GPU other than the first


def _joined_cuda_index(node: ast.JoinedStr) -> bool:
    """`f"cuda:{i}"`: an index formatted into the device string."""
    parts = node.values
    return any(isinstance(first, ast.Constant) and str(first.value).endswith("cuda:")
               and isinstance(second, ast.FormattedValue) for first, second in zip(parts, parts[1:]))


def _call_use(node: ast.Call, qualified: Callable[[ast.AST], str]) -> bool:
    name = qualified(node.func)
    if name == "torch.cuda.device_count":
        return True
    if name == "torch.device" and len(node.args) == 2:
        return literal(node.args[1]) not in (0, "0")
    return any(keyword.arg == "device_map" and literal(keyword.value) not in ONE_DEVICE
               or keyword.arg in PARALLEL_SIZES and literal(keyword.value) != 1
               for keyword in node.keywords)


def several_devices(tree: Tree, lines: List[str], qualified: Callable[[ast.AST], str]) -> List[dict]:
    """Each place the script uses several GPUs from one process: `{"line", "what"}`."""
    found = []
    for node in tree.walk():
        if isinstance(node, ast.Call) and _call_use(node, qualified) \
                or isinstance(node, ast.Constant) and isinstance(node.value, str) and OTHER_INDEX.match(node.value) \
                or isinstance(node, ast.JoinedStr) and _joined_cuda_index(node):
            expression = cast(ast.expr, node)  # each kind above is an expression
            found.append({"line": expression.lineno, "what": segment(lines, expression, 60)})
    return sorted(found, key=lambda item: item["line"])
