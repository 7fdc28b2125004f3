"""The command line a training script accepts, where the script itself shows all of it: one argparse parser made in
the script (`ArgumentParser()` without `parents=`), extended by no other function (deepspeed's config options aside),
without subparsers, `parse_known_args` or `nargs=REMAINDER`, every option string a literal, and a `parse_args()` that
reads sys.argv. Then `options` are every option string it takes and `required` the options it requires."""

from __future__ import annotations

import ast
from typing import Callable, List, Optional, Tuple

from gpudoctor.readers.python.names import literal, segment
from gpudoctor.readers.python.tree import Tree

DEEPSPEED_OPTIONS = ["--deepspeed", "--deepspeed_config", "--deepscale", "--deepscale_config"]
GROUPS = ("add_argument_group", "add_mutually_exclusive_group")


def command_line(tree: Tree, lines: List[str], parsers: set, qualified: Callable[[ast.AST], str]) -> Optional[dict]:
    """`{"line", "what", "options", "required", "allow_abbrev"}` of the script's own closed parser, else None."""
    nodes = tree.walk()
    assigned = [pair for pair in map(_assigned_call, nodes) if pair is not None]  # `name = call(…)`
    found = _closed_parser(nodes, assigned, parsers, qualified)
    if found is None:
        return None
    name, creation, parse = found
    holders = {name} | {target for target, call in assigned if any(_method(call, {name}, group) for group in GROUPS)}
    options, required = ["-h", "--help"], []
    for node in (node for node in nodes if isinstance(node, ast.Call) and _method(node, holders, "add_argument")):
        taken = _option(node, qualified)
        if taken is None:
            return None  # options it cannot show, or a remainder that swallows the rest
        options += taken[0]
        required += taken[1]
    if any(isinstance(node, ast.Call) and qualified(node.func) == "deepspeed.add_config_arguments" for node in nodes):
        options += DEEPSPEED_OPTIONS
    abbrev = next((literal(kw.value) for kw in creation.keywords if kw.arg == "allow_abbrev"), True)
    return {"line": parse.lineno, "what": segment(lines, parse, 70), "options": options, "required": required,
            "allow_abbrev": abbrev is not False}


def _closed_parser(nodes: list, assigned: list, parsers: set, qualified: Callable[[ast.AST], str]) -> Optional[tuple]:
    """(its name, its `ArgumentParser(…)`, its `parse_args()`) of the one parser the script makes, when it reads
    sys.argv and has no subcommands; else None."""
    made = [(target, call) for target, call in assigned
            if target in parsers and qualified(call.func) == "argparse.ArgumentParser"]
    if len(made) != 1:
        return None
    name, creation = made[0]
    parse = next((node for node in nodes if _method(node, {name}, "parse_args") and not (node.args or node.keywords)),
                 None)
    if parse is None or any(_method(node, {name}, "add_subparsers") for node in nodes):
        return None
    return name, creation, parse


def _option(call: ast.Call, qualified: Callable[[ast.AST], str]) -> Optional[Tuple[List[str], List[str]]]:
    """(the option strings one `add_argument` takes, the one it requires) — none for a positional; None when the
    call hides them (`**kwargs`, `*names`, a computed string) or takes the rest of the line (`nargs=REMAINDER`)."""
    strings = [literal(arg) for arg in call.args]
    keywords = {kw.arg: kw.value for kw in call.keywords}
    if None in keywords or not all(isinstance(text, str) for text in strings) or _takes_the_rest(keywords):
        return None  # `**kwargs`, and `*names` or a computed string (literal() gives no str for either)
    if not strings or not all(text.startswith("-") for text in strings):
        return [], []
    options = list(strings)
    if qualified(keywords.get("action") or ast.Constant(None)).endswith("BooleanOptionalAction"):
        options += ["--no-" + text[2:] for text in strings if text.startswith("--")]
    return options, [max(strings, key=len)] if literal(keywords.get("required")) is True else []


def _takes_the_rest(keywords: dict) -> bool:
    """`nargs=argparse.REMAINDER` ("...", "A..."), or an nargs it cannot read."""
    if "nargs" not in keywords:
        return False
    nargs = literal(keywords["nargs"])
    return nargs in ("...", "A...") or not isinstance(nargs, (str, int))


def _assigned_call(node: ast.AST) -> Optional[Tuple[str, ast.Call]]:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and isinstance(node.value, ast.Call):
        return node.targets[0].id, node.value
    return None


def _method(node: ast.AST, receivers: set, method: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method \
        and isinstance(node.func.value, ast.Name) and node.func.value.id in receivers
