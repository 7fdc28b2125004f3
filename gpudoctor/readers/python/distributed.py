"""How a training script expects to be launched, found statically (the script is parsed, never run).

`distributed_features(tree, lines)` returns the `launch` entry of a script's facts (docs/snapshot.md):
- `init`: what starts torch.distributed in the script — `init_process_group` (with its `init_method` and whether it
  passes `rank`/`world_size` itself), DDP, FSDP, `deepspeed.initialize`/`init_distributed`, an accelerate
  `Accelerator`, a Lightning/Fabric trainer (its strategy and devices);
- `spawns`: the script starts its own ranks (`mp.spawn`, `start_processes`, `elastic_launch`);
- `reads_rank_env`: the scheduler variables it maps to ranks itself (`SLURM_PROCID`, `OMPI_COMM_WORLD_RANK` …);
- `data_parallel`: `nn.DataParallel(...)` calls (single process, several GPUs);
- `sets_visible_devices`: assignments of `CUDA_VISIBLE_DEVICES` whose value is the same in every rank (a constant or
  a command-line argument), not one derived from the rank;
- `nemo_env_ignored`: nemo_run executors given `env_vars` whose `run.run(...)` runs in-process (`direct=True`, or no
  executor), where the variables are never applied;
- `local_rank_option`: the `add_argument("--local_rank" | "--local-rank", …)` that takes the local rank from the
  command line (its option strings, default, and whether the script parses with `parse_known_args`);
  `reads_local_rank_env`: the script names `LOCAL_RANK` (reads it from the environment somewhere);
  `argv_parser`: where the script parses the whole command line with a parser that stops at an option it does not
  know — `parse_args()` of an argparse parser made here and extended by no other function (no `parse_known_args`
  anywhere) or a `@hydra.main` function, which takes only
  `key=value` overrides — when it takes no local-rank option and handles no `--local…` argument itself;
- `hf_trainer`: a Hugging Face `Trainer` (transformers, trl) made here: its line, whether `TrainingArguments` set
  `deepspeed`/`fsdp`, and `command_line` when an `HfArgumentParser` takes them from the command line;
- `global_rank_device`: calls that make a global rank (RANK, `dist.get_rank()`, SLURM_PROCID …) a CUDA device
  (gpudoctor.readers.python.rank_device);
- `several_devices`: where the script uses several GPUs from one process (`device_map="auto"`,
  `torch.cuda.device_count()`, a device index other than 0, a tensor-parallel size: gpudoctor.readers.python.devices);
- `local_rank_set_by`: beside a local-rank option, the `deepspeed.initialize(args=ns, …)` that sets `ns.local_rank`
  from LOCAL_RANK, with `used_before`, the first read of `ns.local_rank` ahead of it (still the option's default);
- `command_line`: the options the script's own argparse parser takes and requires, where the script shows all of
  them (gpudoctor.readers.python.command_line).
Every entry carries its line.
"""

from __future__ import annotations

import ast
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple, Union

from gpudoctor.readers.env import CVD
from gpudoctor.readers.python.command_line import command_line
from gpudoctor.readers.python.devices import several_devices
from gpudoctor.readers.python.names import NO_VALUE, dotted, literal, module_aliases, qualified_name, segment
from gpudoctor.readers.python.rank_device import global_rank_devices
from gpudoctor.readers.python.tree import Tree

INIT = {
    "torch.distributed.init_process_group": "init_process_group",
    "torch.nn.parallel.DistributedDataParallel": "DistributedDataParallel",
    "torch.distributed.fsdp.FullyShardedDataParallel": "FullyShardedDataParallel",
    "torch.distributed.fsdp.fully_shard": "fully_shard",
    "torch.distributed._composable.fsdp.fully_shard": "fully_shard",
    "deepspeed.initialize": "deepspeed.initialize",
    "deepspeed.init_distributed": "deepspeed.init_distributed",
    "accelerate.Accelerator": "Accelerator",
    "lightning.Trainer": "Lightning Trainer",
    "lightning.Fabric": "Lightning Fabric",
}
SPAWNS = {"torch.multiprocessing.spawn", "torch.multiprocessing.start_processes",
          "torch.distributed.launcher.elastic_launch", "accelerate.notebook_launcher"}
DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel"}
RANK_VARIABLES = ("SLURM_PROCID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                  "PMIX_RANK", "MV2_COMM_WORLD_RANK")
RANK_WORDS = ("rank", "local_rank", "LOCAL_RANK", "gpu", "device_id", "proc")
LOCAL_RANK_OPTIONS = ("--local_rank", "--local-rank")


def _keyword(call: ast.Call, name: str, default: Optional[ast.AST] = None) -> Optional[ast.AST]:
    return next((kw.value for kw in call.keywords if kw.arg == name), default)


def _process_group(call: ast.Call) -> Dict[str, Any]:
    """How init_process_group finds its peers (`init_method`), its backend, whether the script passes the rank."""
    method, backend = _keyword(call, "init_method"), _keyword(call, "backend", call.args[0] if call.args else None)
    return {"init_method": literal(method) if isinstance(literal(method), str) else (
                None if method is None else "expression"),
            "sets_rank": any(kw.arg in ("rank", "world_size") for kw in call.keywords) or len(call.args) > 3,
            "backend": literal(backend) if isinstance(literal(backend), str) else None}


def _lightning(call: ast.Call) -> Dict[str, Any]:
    """What a Lightning Trainer or Fabric is given: strategy, devices, accelerator, num_nodes."""
    given = {key: _keyword(call, key) for key in ("strategy", "devices", "accelerator", "num_nodes")}
    return {key: literal(value) if isinstance(literal(value), (str, int, list)) else "expression"
            for key, value in given.items() if value is not None}


def _device_ids(call: ast.Call) -> Any:
    """DataParallel's device_ids: a list, "expression", or None when not given."""
    ids = _keyword(call, "device_ids", call.args[1] if len(call.args) > 1 else None)
    known = literal(ids) if ids is not None else None
    return list(known) if isinstance(known, (list, tuple)) else (None if ids is None else "expression")


# what an init entry records besides its line, by the call's last name or its whole name
INIT_DETAILS = {"init_process_group": (_process_group,), "lightning.Trainer": (_lightning,),
                "lightning.Fabric": (_lightning,)}


class _Finder:
    def __init__(self, tree: Tree, lines: List[str]):
        self.index = tree  # the file's one walk
        self.tree = tree.module
        self.lines = lines
        self.aliases = module_aliases(tree)
        self.args_names = _argparse_results(tree)
        self.constants = _string_constants(tree.body)
        self.parses_known = any(isinstance(node, ast.Attribute) and node.attr == "parse_known_args"
                                for node in tree.walk())  # unknown options are left, not an error
        self.factories: Dict[str, dict] = {}  # the script's functions that make an executor (`run` finds them)

    def qualified(self, node: ast.AST) -> str:
        return qualified_name(node, self.aliases)

    def run(self) -> Dict[str, Any]:
        found: Dict[str, Any] = {"hf_trainer": None, "init": [], "spawns": [], "reads_rank_env": [],
                                 "data_parallel": [],
                                 "sets_visible_devices": [], "nemo_env_ignored": []}
        executors: Dict[str, dict] = {}
        self.factories = self.executor_factories()
        for node in self.index.walk():
            if isinstance(node, ast.Call):
                self.call(node, found, executors)
            elif isinstance(node, ast.Constant) and node.value in RANK_VARIABLES:
                if node.value not in found["reads_rank_env"]:
                    found["reads_rank_env"].append(node.value)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    self.environ_assignment(target, node.value, node, found)
                if isinstance(node.value, ast.Call) and len(node.targets) == 1 \
                        and isinstance(node.targets[0], ast.Name):
                    executor = self.executor(node.value)
                    if executor:
                        executors[node.targets[0].id] = executor
        self.nemo_runs(found, executors)
        found["init"].sort(key=lambda e: e["line"])
        if found["hf_trainer"] and found["hf_trainer"]["line"] is None:
            found["hf_trainer"] = None  # arguments without a Trainer: nothing is wrapped here
        found["local_rank_option"] = self.local_rank_option()
        found["reads_local_rank_env"] = any(isinstance(node, ast.Constant) and node.value == "LOCAL_RANK"
                                            for node in self.index.walk())
        found["global_rank_device"] = global_rank_devices(self.index, self.lines, self.qualified)
        found["several_devices"] = several_devices(self.index, self.lines, self.qualified)
        found["local_rank_set_by"] = self.local_rank_set_by() if found["local_rank_option"] else None
        found["argv_parser"] = None if found["local_rank_option"] else self.argv_parser()
        found["command_line"] = None if self.parses_known else command_line(self.index, self.lines,
                                                                             self.own_parsers(), self.qualified)
        return found

    def argv_parser(self) -> Optional[dict]:
        """The first parse of the whole command line that refuses an unknown `--local_rank=N` (see the module doc)."""
        if self.parses_known or any(isinstance(node, ast.Constant) and isinstance(node.value, str)
                                    and node.value.startswith(LOCAL_RANK_OPTIONS) for node in self.index.walk()):
            return None
        found: List[Dict[str, Any]] = []
        parsers = self.own_parsers()
        for node in self.index.walk():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "parse_args" \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in parsers \
                    and not node.args and not any(kw.arg == "args" for kw in node.keywords):
                found.append({"line": node.lineno, "what": segment(self.lines, node, 70), "kind": "argparse"})
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    if self.qualified(target) == "hydra.main":
                        found.append({"line": decorator.lineno, "what": "@" + segment(self.lines, decorator, 69),
                                      "kind": "hydra"})
        return min(found, key=lambda entry: entry["line"]) if found else None

    def local_rank_option(self) -> Optional[dict]:
        """The first `add_argument` whose option strings include `--local_rank` or `--local-rank`."""
        for node in self.index.walk():
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "add_argument":
                options = [literal(arg) for arg in node.args]
                if any(option in LOCAL_RANK_OPTIONS for option in options):
                    default = next((kw.value for kw in node.keywords if kw.arg == "default"), None)
                    known = None if default is None else literal(default)  # no default=: argparse's None
                    return {"line": node.lineno, "what": segment(self.lines, node, 70),
                            "options": [o for o in options if isinstance(o, str)],
                            "default": known if isinstance(known, (int, str)) or default is None else "expression",
                            "parse_known": self.parses_known}
        return None

    def local_rank_set_by(self) -> Optional[dict]:
        """`deepspeed.initialize(args=ns, …)`: DeepSpeed's engine sets `ns.local_rank` from LOCAL_RANK
        (deepspeed/runtime/engine.py `_configure_with_arguments`). With `used_before`: the first `ns.local_rank` read
        ahead of the call in the same function (or in a function of the script called there first), which still
        sees the option's default."""
        found = next(self.initialize_calls(), None)
        if found is None:
            return None
        body, call, name = found
        functions = {n.name: n for n in self.index.walk() if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        before = [n for n in body if isinstance(n, ast.expr) and n.lineno < call.lineno]  # what `used` can be
        used = [n for n in before if _reads_local_rank(n, name)]
        used += [n for n in before if self.hands_to_a_reader(n, name, functions)]
        first = min(used, key=lambda n: n.lineno) if used else None
        return {"line": call.lineno, "what": segment(self.lines, call, 70), "by": "deepspeed.initialize",
                "used_before": None if first is None
                else {"line": first.lineno, "what": segment(self.lines, first, 70)}}

    def initialize_calls(self) -> Iterator[Tuple[List[ast.AST], ast.Call, str]]:
        """(the nodes of its scope, the call, the name of the namespace it is given) of each
        `deepspeed.initialize(args=ns, …)`, the module's first, then each function's."""
        scopes = [self.tree] + [n for n in self.index.walk() if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for scope in scopes:
            body = [n for n in self.index.postorder(scope) if n is not scope]
            for call in body:
                if isinstance(call, ast.Call) and self.qualified(call.func) == "deepspeed.initialize":
                    handed = next((kw.value for kw in call.keywords if kw.arg == "args"),
                                  call.args[0] if call.args else None)
                    if isinstance(handed, ast.Name):
                        yield body, call, handed.id

    def hands_to_a_reader(self, node: ast.AST, name: str,
                          functions: Dict[str, Union[ast.FunctionDef, ast.AsyncFunctionDef]]) -> bool:
        """`helper(ns)`: a function of the script given the namespace, which reads some `.local_rank`."""
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in functions \
            and any(isinstance(arg, ast.Name) and arg.id == name for arg in node.args) \
            and any(_reads_local_rank(n, None) for n in self.index.walk(functions[node.func.id]))

    def own_parsers(self) -> set:
        """Names of `argparse.ArgumentParser()`s whose every option this script shows: made here without `parents=`,
        and handed to no other function (a helper elsewhere may add `--local_rank`), deepspeed's config options
        aside."""
        made: Set[str] = set()
        handed: Set[str] = set()
        for node in self.index.walk():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name):
                if self.qualified(node.value.func) == "argparse.ArgumentParser" \
                        and not any(kw.arg == "parents" for kw in node.value.keywords):
                    made.add(node.targets[0].id)
            if isinstance(node, ast.Call) and self.qualified(node.func) != "deepspeed.add_config_arguments":
                handed.update(arg.id for arg in list(node.args) + [kw.value for kw in node.keywords]
                              if isinstance(arg, ast.Name))
        return made - handed

    def call(self, call: ast.Call, found: Dict[str, Any], executors: Dict[str, dict]) -> None:
        name = self.qualified(call.func)
        where = {"line": call.lineno, "what": segment(self.lines, call, 70)}
        if name in INIT:
            entry = dict(where, kind=INIT[name])
            for detail in INIT_DETAILS.get(name.rsplit(".", 1)[-1], ()) + INIT_DETAILS.get(name, ()):
                entry.update(detail(call))
            found["init"].append(entry)
        elif self.hf_trainer(call, name, found):
            pass
        elif name in SPAWNS:
            found["spawns"].append(dict(where, call=name))
        elif name in DATA_PARALLEL:
            found["data_parallel"].append(dict(where, device_ids=_device_ids(call)))
        elif name.rsplit(".", 1)[-1] in ("putenv", "setdefault", "update") and call.args:
            self.environ_call(call, name, found)

    def hf_trainer(self, call: ast.Call, name: str, found: Dict[str, Any]) -> bool:
        """A Hugging Face Trainer (transformers', trl's) or its arguments: where DeepSpeed/FSDP are configured."""
        if not name.startswith(("transformers.", "trl.")) or not name.endswith(("Trainer", "TrainingArguments",
                                                                                   "Config", "HfArgumentParser")):
            return False
        entry = found["hf_trainer"] = found["hf_trainer"] or {"line": None, "what": None, "deepspeed": False,
                                                              "fsdp": False, "command_line": False}
        short = name.rsplit(".", 1)[-1]
        if short == "HfArgumentParser":
            entry["command_line"] = True  # --deepspeed / --fsdp may come from the command line
        elif short.endswith("Trainer") and entry["line"] is None:
            entry.update(line=call.lineno, what=segment(self.lines, call, 70))
        for keyword in call.keywords:
            if keyword.arg not in ("deepspeed", "fsdp"):
                continue
            value = literal(keyword.value)
            options = self.options_read(keyword.value) if value is NO_VALUE else []
            if options:  # `deepspeed=args.deepspeed`: set only where the command line passes that option
                entry[f"{keyword.arg}_options"] = options
            elif value not in (None, "", False, [], ()):
                entry[keyword.arg] = True
        return True

    def options_read(self, value: ast.AST) -> List[str]:
        """The command-line options a value is taken from (`args.deepspeed`, `cfg.ds if args.use_ds else None`):
        the attributes read from the parsed arguments, as `--name`."""
        under = self.index.walk(value)
        return sorted({f"--{node.attr}" for node in under if isinstance(node, ast.Attribute)
                       and isinstance(node.value, ast.Name) and node.value.id in self.args_names})

    # -- CUDA_VISIBLE_DEVICES ----------------------------------------------------------------------------------
    def environ_assignment(self, target: ast.AST, value: ast.AST, node: ast.stmt, found: Dict[str, Any]) -> None:
        if isinstance(target, ast.Subscript) and self.qualified(target.value) == "os.environ" \
                and literal(target.slice) == CVD:
            self.visible_devices(value, node, found)

    def environ_call(self, call: ast.Call, name: str, found: Dict[str, Any]) -> None:
        if name == "os.putenv" and literal(call.args[0]) == CVD and len(call.args) > 1:
            self.visible_devices(call.args[1], call, found)
        elif name == "os.environ.update" and isinstance(call.args[0], ast.Dict):
            for key, value in zip(call.args[0].keys, call.args[0].values):
                if key is not None and literal(key) == CVD:
                    self.visible_devices(value, call, found)

    def visible_devices(self, value: ast.AST, node: Union[ast.expr, ast.stmt], found: Dict[str, Any]) -> None:
        source = self.same_in_every_rank(value)
        if source:
            found["sets_visible_devices"].append({"line": node.lineno, "what": segment(self.lines, node, 70),
                                                  "source": source, "options": self.options_read(value)})

    def same_in_every_rank(self, value: ast.AST) -> Optional[str]:
        """"constant" / "argument" when the value is the same in every rank; None when it may differ per rank."""
        text = ast.dump(value)
        if any(word in text for word in ("'LOCAL_RANK'", "'RANK'", "SLURM_LOCALID", "SLURM_PROCID")):
            return None
        known = literal(value)
        if isinstance(known, (str, int)):
            return "constant"
        if isinstance(value, ast.Name) and value.id in self.constants:
            return "constant"
        under = self.index.walk(value)
        names = {node.id for node in under if isinstance(node, ast.Name)}
        attrs = {node.attr.lower() for node in under if isinstance(node, ast.Attribute)}
        if any(word.lower() in attrs or word in names for word in RANK_WORDS):
            return None
        if names & self.args_names or "sys.argv" in {dotted(n) for n in under if isinstance(n, ast.Attribute)}:
            return "argument"
        return None

    # -- nemo_run ------------------------------------------------------------------------------------------------
    def executor_factories(self) -> Dict[str, dict]:
        """Functions of the script that build an executor with env_vars (`def local_executor(): … return
        run.LocalExecutor(env_vars=…)`), so that `executor=local_executor()` counts too."""
        found = {}
        for node in self.index.walk():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                made = next((self.executor(call) for call in self.index.walk(node) if isinstance(call, ast.Call)
                             and self.executor(call)), None)
                if made:
                    found[node.name] = made
        return found

    def executor(self, call: ast.Call) -> Optional[dict]:
        if isinstance(call.func, ast.Name) and call.func.id in self.factories:
            return self.factories[call.func.id]
        name = self.qualified(call.func)
        if not name.startswith("nemo_run.") or not name.endswith("Executor"):
            return None
        env = next((kw.value for kw in call.keywords if kw.arg == "env_vars"), None)
        if env is None or isinstance(env, ast.Dict) and not env.keys:
            return None
        return {"executor": name.rsplit(".", 1)[-1], "line": call.lineno, "what": segment(self.lines, call, 70)}

    def applied_env_vars(self) -> set:
        """Executors whose `env_vars` the script applies to its own environment itself:
        `os.environ.update(executor.env_vars)`, or `os.environ[k] = v` in a loop over `executor.env_vars.items()`."""
        applied = set()
        for node in self.index.walk():
            sources: List[ast.AST] = []
            if isinstance(node, ast.Call) and self.qualified(node.func) == "os.environ.update" and node.args:
                sources = [node.args[0]]
            elif isinstance(node, ast.For) and any(
                    isinstance(t, ast.Subscript) and self.qualified(t.value) == "os.environ"
                    for item in node.body if isinstance(item, ast.Assign) for t in item.targets):
                sources = [node.iter.func.value if isinstance(node.iter, ast.Call)
                           and isinstance(node.iter.func, ast.Attribute) else node.iter]
            for source in sources:
                if isinstance(source, ast.Attribute) and source.attr == "env_vars" \
                        and isinstance(source.value, ast.Name):
                    applied.add(source.value.id)
        return applied

    def nemo_runs(self, found: Dict[str, Any], executors: Dict[str, dict]) -> None:
        applied = self.applied_env_vars()
        executors = {name: made for name, made in executors.items() if name not in applied}
        for node in self.index.walk():
            if not (isinstance(node, ast.Call) and self.qualified(node.func) == "nemo_run.run"):
                continue
            direct = next((kw.value for kw in node.keywords if kw.arg == "direct"), None)
            executor = next((kw.value for kw in node.keywords if kw.arg == "executor"), None)
            given = None
            if isinstance(executor, ast.Name):
                given = executors.get(executor.id)
            elif isinstance(executor, ast.Call):
                given = self.executor(executor)
            in_process = literal(direct) is True or executor is None
            if given and in_process:
                found["nemo_env_ignored"].append({"line": node.lineno, "what": segment(self.lines, node, 70),
                                                  "executor": given["executor"], "executor_line": given["line"],
                                                  "direct": literal(direct) is True})
            elif executor is None and executors and in_process:
                first = min(executors.values(), key=lambda e: e["line"])
                found["nemo_env_ignored"].append({"line": node.lineno, "what": segment(self.lines, node, 70),
                                                  "executor": first["executor"], "executor_line": first["line"],
                                                  "direct": literal(direct) is True, "no_executor": True})


def _reads_local_rank(node: ast.AST, name: Optional[str]) -> bool:
    """`name.local_rank` read here (any name when `name` is None)."""
    return isinstance(node, ast.Attribute) and node.attr == "local_rank" and isinstance(node.ctx, ast.Load) \
        and isinstance(node.value, ast.Name) and (name is None or node.value.id == name)


def _is_parse(value: ast.AST, helpers: set) -> bool:
    """`parser.parse_args()` / `parse_known_args()` (or `[0]` of it), or a call of one of the script's `helpers`
    that return one."""
    call = value.value if isinstance(value, ast.Subscript) else value
    if not isinstance(call, ast.Call):
        return False
    return isinstance(call.func, ast.Attribute) and call.func.attr in ("parse_args", "parse_known_args") or (
        isinstance(call.func, ast.Name) and call.func.id in helpers)


def _bound_names(tree: Tree, scope: Optional[ast.AST], helpers: set) -> set:
    names: Set[str] = set()
    for node in tree.walk(scope):
        if isinstance(node, ast.Assign) and _is_parse(node.value, helpers):
            for target in node.targets:
                names.update(item.id for item in tree.walk(target) if isinstance(item, ast.Name))
    return names


def _argparse_results(tree: Tree) -> set:
    """Names bound to `parser.parse_args()` / `parse_known_args()` anywhere in the script, directly or through the
    script's own functions that return the parse (`def parse_args(): …; return parser.parse_args()`)."""
    functions = [node for node in tree.walk() if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    helpers: set = set()
    while True:
        found = {f.name for f in functions for node in tree.walk(f) if isinstance(node, ast.Return)
                 and node.value is not None and (_is_parse(node.value, helpers) or isinstance(node.value, ast.Name)
                                                 and node.value.id in _bound_names(tree, f, helpers))}
        if found <= helpers:
            break
        helpers |= found
    return _bound_names(tree, None, helpers)


def _string_constants(body: List[ast.stmt]) -> set:
    """Module-level names assigned a string or integer literal."""
    return {target.id for node in body if isinstance(node, ast.Assign)
            for target in node.targets if isinstance(target, ast.Name)
            and isinstance(literal(node.value), (str, int))}


def distributed_features(tree: Tree, lines: List[str]) -> Dict[str, Any]:
    """The script's `launch` facts (see the module docstring). Never raises for a parsed tree."""
    try:
        return _Finder(tree, lines).run()
    except RecursionError:
        return {}
