"""The command line a training script accepts, where the script itself shows all of it: one argparse parser made in
the script (`ArgumentParser()` without `parents=`), extended by no other function (deepspeed's config options aside),
without subparsers, `parse_known_args` or `nargs=REMAINDER`, every option string a literal, and a `parse_args()` that
reads sys.argv. Then `options` are every option string it takes and `required` the options it requires."""

from __future__ import annotations

import ast
from typing import Callable, List, Optional

from gpudoctor.readers.python.names import literal, segment

DEEPSPEED_OPTIONS = ["--deepspeed", "--deepspeed_config", "--deepscale", "--deepscale_config"]
GROUPS = ("add_argument_group", "add_mutually_exclusive_group")


def command_line(tree: ast.Module, lines: List[str], parsers: set, qualified: Callable[[ast.AST], str]) \
        -> Optional[dict]:
    """`{"line", "what", "options", "required", "allow_abbrev"}` of the script's own closed parser, else None."""
    made = [node for node in ast.walk(tree) if isinstance(node, ast.Assign) and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name) and node.targets[0].id in parsers
            and isinstance(node.value, ast.Call) and qualified(node.value.func) == "argparse.ArgumentParser"]
    if len(made) != 1:
        return None
    name, creation = made[0].targets[0].id, made[0].value
    parse = next((node for node in ast.walk(tree) if _method(node, {name}, "parse_args") and not node.args
                  and not node.keywords), None)
    if parse is None or any(_method(node, {name}, "add_subparsers") for node in ast.walk(tree)):
        return None
    holders = {name} | {node.targets[0].id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                        and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                        and any(_method(node.value, {name}, group) for group in GROUPS)}
    options, required = ["-h", "--help"], []
    for node in ast.walk(tree):
        if not _method(node, holders, "add_argument"):
            continue
        strings = [literal(arg) for arg in node.args]
        keywords = {kw.arg: kw.value for kw in node.keywords}
        nargs = literal(keywords.get("nargs")) if "nargs" in keywords else None
        if None in keywords or any(isinstance(arg, ast.Starred) for arg in node.args) \
                or not all(isinstance(text, str) for text in strings) or nargs in ("...", "A...") \
                or ("nargs" in keywords and not isinstance(nargs, (str, int))):
            return None  # options it cannot show, or a remainder that swallows the rest
        if strings and all(text.startswith("-") for text in strings):
            options += strings
            if qualified(keywords.get("action") or ast.Constant(None)).endswith("BooleanOptionalAction"):
                options += ["--no-" + text[2:] for text in strings if text.startswith("--")]
            if literal(keywords.get("required")) is True:
                required.append(max(strings, key=len))
    if any(isinstance(node, ast.Call) and qualified(node.func) == "deepspeed.add_config_arguments"
           for node in ast.walk(tree)):
        options += DEEPSPEED_OPTIONS
    abbrev = next((literal(kw.value) for kw in creation.keywords if kw.arg == "allow_abbrev"), True)
    return {"line": parse.lineno, "what": segment(lines, parse, 70), "options": options, "required": required,
            "allow_abbrev": abbrev is not False}


def _method(node: ast.AST, receivers: set, method: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method \
        and isinstance(node.func.value, ast.Name) and node.func.value.id in receivers
