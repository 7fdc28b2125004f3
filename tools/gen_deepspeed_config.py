"""Regenerate `rules/deepspeed_config.toml`, the DeepSpeed config keys GD307 knows, from an installed DeepSpeed.

    pip install deepspeed==X.Y.Z && python tools/gen_deepspeed_config.py > rules/deepspeed_config.toml

How the keys are found (nothing is typed in by hand except where marked):
- top level and the dict-based sections (`activation_checkpointing`, `aio`, …): `DeepSpeedConfig` is run on a
  config whose dicts record every key DeepSpeed looks up (get / [] / in);
- pydantic sections (`zero_optimization`, `fp16`, `bf16`, the monitors, …): the model's field names and aliases
  (DeepSpeedConfigModel sets `extra="forbid"`, so any other key is a ValidationError);
- enum values: the strict sections' fields typed with an Enum (ZeRO `stage`, the offload `device`s);
- removed keys: DeepSpeed's own `_REMOVED_TOP_LEVEL_CONFIG_KEYS` / `_REMOVED_ZERO_CONFIG_KEYS` messages, with the
  release that started rejecting them (REMOVED_SINCE, read off the 0.19.7 and 0.19.8 sdists);
- stage-3-only `zero_optimization` keys: the fields DeepSpeed's code reads only where ZeRO-3 runs (`stage3_only()`).
Run by a maintainer, never by gpudoctor; tests/test_deepspeed.py checks the committed table against the installed
DeepSpeed when there is one.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import warnings

# section path -> pydantic model that validates it (DeepSpeedConfig passes the dict as **kwargs).
STRICT = {
    "zero_optimization": "deepspeed.runtime.zero.config:DeepSpeedZeroConfig",
    "zero_optimization.offload_param": "deepspeed.runtime.zero.offload_config:DeepSpeedZeroOffloadParamConfig",
    "zero_optimization.offload_optimizer":
        "deepspeed.runtime.zero.offload_config:DeepSpeedZeroOffloadOptimizerConfig",
    "zero_optimization.zenflow": "deepspeed.runtime.zenflow.zenflow_config:ZenFlowConfig",
    "zero_optimization.leaf_module": "deepspeed.runtime.zero.leaf_module_config:DeepSpeedZeroLeafModuleConfig",
    "fp16": "deepspeed.runtime.precision_config:DeepSpeedFP16Config",
    "bf16": "deepspeed.runtime.precision_config:DeepSpeedBF16Config",
    "bfloat16": "deepspeed.runtime.precision_config:DeepSpeedBF16Config",
    "tensorboard": "deepspeed.monitor.config:TensorBoardConfig",
    "wandb": "deepspeed.monitor.config:WandbConfig",
    "csv_monitor": "deepspeed.monitor.config:CSVConfig",
    "comet": "deepspeed.monitor.config:CometConfig",
    "comms_logger": "deepspeed.comm.config:CommsLoggerConfig",
    "compile": "deepspeed.compile.config:CompileConfig",
    "hybrid_engine": "deepspeed.runtime.config:HybridEngineConfig",
    "tensor_parallel": "deepspeed.runtime.tensor_parallel.config:TPTrainingConfig",
}
# dict-based sections whose keys DeepSpeed reads one by one and whose unknown keys it ignores.
LOOSE = ["activation_checkpointing", "aio", "autotuning", "checkpoint", "data_efficiency", "data_types",
         "flops_profiler", "optimizer", "scheduler", "torch_autocast"]
# Keys the recorder cannot see (read with `.keys()` or before the recorder is reached), with where DeepSpeed reads them.
EXTRA = {
    "": ["sequence_parallel_size"],  # DeepSpeedConfig.__init__: `"sequence_parallel_size" in config`
    "optimizer": ["legacy_fusion"],  # get_optimizer_legacy_fusion: `LEGACY_FUSION in param_dict[OPTIMIZER].keys()`
}
# The first release whose DeepSpeedConfig raises DeepSpeedConfigError for the key (issue #8489).
REMOVED_SINCE = {
    "0.19.7": ["nebula", "compression_training", "quantize_training", "sparse_attention",
               "zero_optimization.mics_shard_size", "zero_optimization.mics_hierarchical_params_gather"],
    "0.19.8": ["amp", "sparse_gradients", "eigenvalue", "elasticity", "graph_harvesting", "curriculum_learning",
               "progressive_layer_drop", "zero_optimization.zeropp_loco_param"],
}
# Keys DeepSpeed renamed without keeping the old name: the old one is ignored silently since `since`.
RENAMED = [
    {"key": "aio.thread_count", "new": "intra_op_parallelism", "since": "0.16.4",
     "source": "deepspeedai/DeepSpeed#7056 (commit c9da4892a, first tag v0.16.4)"},
]
SAMPLE = {
    "train_micro_batch_size_per_gpu": 1,
    "activation_checkpointing": {"partition_activations": False},
    "aio": {"block_size": 1048576},
    "autotuning": {"enabled": False},
    "checkpoint": {"tag_validation": "Warn"},
    "data_efficiency": {"enabled": False},
    "data_types": {"grad_accum_dtype": "fp32"},
    "flops_profiler": {"enabled": False},
    "optimizer": {"type": "Adam", "params": {"lr": 1e-3}},
    "scheduler": {"type": "WarmupLR", "params": {}},
    "torch_autocast": {"enabled": False},
}


def recorded_keys() -> dict:
    from deepspeed.runtime.config import DeepSpeedConfig

    seen: dict = {}

    class Recorder(dict):
        def __init__(self, path, data):
            super().__init__()
            self._path = path
            for key, value in data.items():
                child = Recorder(f"{path}.{key}" if path else key, value) if isinstance(value, dict) else value
                dict.__setitem__(self, key, child)

        def _mark(self, key):
            if isinstance(key, str):
                seen.setdefault(self._path, set()).add(key)

        def get(self, key, default=None):
            self._mark(key)
            return super().get(key, default)

        def __getitem__(self, key):
            self._mark(key)
            return super().__getitem__(key)

        def __contains__(self, key):
            self._mark(key)
            return super().__contains__(key)

        def __reduce_ex__(self, protocol):  # copy.copy() inside DeepSpeedConfig keeps recording
            return (Recorder, (self._path, dict(self)))

    DeepSpeedConfig(Recorder("", SAMPLE))
    return seen


def model_keys(target: str) -> list:
    module, _, name = target.partition(":")
    model = getattr(importlib.import_module(module), name)
    keys = set()
    for field_name, info in model.model_fields.items():
        keys.add(field_name)
        if info.alias:
            keys.add(info.alias)
    return sorted(keys)


def enum_values() -> list:
    """The strict sections' fields typed with an Enum (ZeRO `stage`, offload `device`): the values pydantic accepts."""
    import enum
    import typing

    found = []
    for path, target in STRICT.items():
        module, _, name = target.partition(":")
        model = getattr(importlib.import_module(module), name)
        for field_name, info in model.model_fields.items():
            for kind in typing.get_args(info.annotation) or (info.annotation,):
                if isinstance(kind, type) and issubclass(kind, enum.Enum):
                    values = list(dict.fromkeys(item.value for item in kind))
                    found.append({"key": f"{path}.{info.alias or field_name}", "values": values})
    return found


def removed_keys() -> list:
    from deepspeed.runtime import config

    messages = {key: text for key, text in config._REMOVED_TOP_LEVEL_CONFIG_KEYS.items()}
    messages.update({f"zero_optimization.{key}": text for key, text in config._REMOVED_ZERO_CONFIG_KEYS.items()})
    since = {key: release for release, keys in REMOVED_SINCE.items() for key in keys}
    missing = set(messages) - set(since)
    if missing:
        raise SystemExit(f"add these removed keys to REMOVED_SINCE: {sorted(missing)}")
    return [{"key": key, "since": since[key], "message": messages[key]} for key in sorted(messages)]


# Where DeepSpeed reads a `zero_optimization` field only when ZeRO-3 runs: these modules exist for ZeRO-3 alone
# (zero.Init, the stage-3 optimizer, its parameter offload); in engine.py, the stage-3 branch of
# `_configure_zero_optimizer` and code under `if self.zero_optimization_partition_weights():`.
STAGE3_MODULES = ("runtime/zero/partition_parameters.py", "runtime/zero/stage3.py",
                  "runtime/zero/parameter_offload.py", "runtime/superoffload/superoffload_stage3.py")


def _zero_field_reads(tree, accessors: dict):
    """(field, node, ancestors) for every read of a ZeroConfig field: `….zero_config.FIELD` or an engine accessor
    call `self.zero_X()` (accessors: method name -> field)."""
    import ast

    def visit(node, ancestors):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and \
                node.value.attr == "zero_config":
            yield node.attr, node, ancestors
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in accessors:
            yield accessors[node.func.attr], node, ancestors
        for child in ast.iter_child_nodes(node):
            yield from visit(child, ancestors + (node,))

    yield from visit(tree, ())


def _stage3_context(ancestors, node) -> bool:
    """Whether engine.py code runs only at ZeRO stage 3: the `zero_stage == ZeroStageEnum.weights` branch, or the
    body of `if self.zero_optimization_partition_weights():`."""
    import ast

    chain = ancestors + (node,)
    for parent, child in zip(chain, chain[1:]):
        if not isinstance(parent, ast.If) or child not in parent.body:
            continue
        test = ast.unparse(parent.test)
        if test in ("zero_stage == ZeroStageEnum.weights", "self.zero_optimization_partition_weights()"):
            return True
    return False


def _engine_accessors(engine) -> dict:
    """DeepSpeedEngine's `zero_X()` methods that only return a ZeroConfig field: method name -> the returned node."""
    import ast

    found = {}
    for node in ast.walk(engine):
        body = node.body if isinstance(node, ast.FunctionDef) and node.name.startswith("zero_") else []
        if len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Attribute) and \
                ast.unparse(body[0].value).startswith("self._config.zero_config."):
            found[node.name] = body[0].value
    return found


def _zero_fields_read(root) -> tuple:
    """(fields read where only ZeRO-3 runs, fields read anywhere else) over every module of the DeepSpeed at
    `root`, but the config model itself."""
    import ast

    engine = ast.parse((root / "runtime/engine.py").read_text())
    returns = _engine_accessors(engine)
    accessors = {name: node.attr for name, node in returns.items()}
    definitions = {id(node) for node in returns.values()}
    stage3, elsewhere = set(), set()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        is_engine = relative == "runtime/engine.py"
        try:
            tree = engine if is_engine else ast.parse(path.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        if relative == "runtime/zero/config.py":
            continue
        for field, node, ancestors in _zero_field_reads(tree, accessors if is_engine else {}):
            if id(node) in definitions:
                continue
            in_stage3 = relative in STAGE3_MODULES or (is_engine and _stage3_context(ancestors, node))
            (stage3 if in_stage3 else elsewhere).add(field)
    return stage3, elsewhere


def stage3_only() -> list:
    """The `zero_optimization` keys (names and aliases) that DeepSpeed reads only when ZeRO-3 runs: a field read in
    no other place. Deprecated fields follow the field that replaces them (`new_param`)."""
    import pathlib

    import deepspeed
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig

    stage3, elsewhere = _zero_fields_read(pathlib.Path(deepspeed.__file__).parent)
    only = stage3 - elsewhere
    keys = set()
    for name, info in DeepSpeedZeroConfig.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        if name in only or (extra.get("deprecated") and extra.get("new_param") in only):
            keys.update(key for key in (name, info.alias) if key)
    return sorted(keys)


def toml_list(items) -> str:
    """A TOML array of strings, wrapped at 100 columns."""
    quoted = [json.dumps(item) for item in items]
    if len(", ".join(quoted)) <= 90:
        return "[" + ", ".join(quoted) + "]"
    lines, line = [], ""
    for item in quoted:
        if line and len(line) + len(item) + 2 > 100:
            lines.append(line.rstrip())
            line = ""
        line += item + ", "
    lines.append(line.rstrip().rstrip(","))
    return "[\n  " + "\n  ".join(lines) + ",\n]"


def main() -> None:
    warnings.filterwarnings("ignore")
    with contextlib.redirect_stdout(io.StringIO()):  # DeepSpeed logs to stdout
        import deepspeed

        removed = removed_keys()
        seen = recorded_keys()
        enums = enum_values()
        zero3 = stage3_only()
    gone = {item["key"] for item in removed}
    sections = []
    for path in [""] + LOOSE:
        keys = set(seen.get(path, set())) | set(EXTRA.get(path, []))
        keys = {k for k in keys if (f"{path}.{k}" if path else k) not in gone}
        if path == "":
            keys |= {p.split(".")[0] for p in STRICT}
        sections.append((path, None, sorted(keys)))
    for path, target in STRICT.items():
        keys = [k for k in model_keys(target) if f"{path}.{k}" not in gone]
        sections.append((path, target, keys))

    print(f"""# DeepSpeed config keys, for GD307 (unknown keys, with the closest real one; enum values), GD304-GD306,
# GD309 and GD311.
# GENERATED by tools/gen_deepspeed_config.py from DeepSpeed {deepspeed.__version__} (PyPI); do not edit by hand.
# strict = true: a pydantic model with extra="forbid" validates the section, so DeepSpeed raises a
# ValidationError ("Extra inputs are not permitted") for any other key. strict = false: DeepSpeed reads the keys
# it knows one by one and silently ignores the rest. Sections not listed (optimizer.params, pipeline, …) are free.

[source]
repository = "https://github.com/deepspeedai/DeepSpeed"
release = "{deepspeed.__version__}"
checked_against_commit = "edaa7221267243c7be7fb49c5d5f5c4fb97b4641"  # master 2026-08-22 (0.19.6.dev)
files = [
  "deepspeed/runtime/config.py", "deepspeed/runtime/constants.py", "deepspeed/runtime/config_utils.py",
  "deepspeed/runtime/zero/config.py", "deepspeed/runtime/zero/offload_config.py",
  "deepspeed/runtime/precision_config.py", "deepspeed/monitor/config.py", "deepspeed/comm/config.py",
  "deepspeed/compile/config.py", "deepspeed/runtime/tensor_parallel/config.py",
]
method = "keys DeepSpeedConfig looks up (recorded), pydantic fields and aliases, _REMOVED_*_CONFIG_KEYS"
""")
    for path, model, keys in sections:
        print("[[section]]")
        print(f"path = {json.dumps(path)}")
        print(f"strict = {'true' if model else 'false'}")
        if model:
            print(f"model = {json.dumps(model)}")
        print(f"keys = {toml_list(keys)}")
        print()
    for item in enums:
        print("[[enum]]")
        print(f"key = {json.dumps(item['key'])}")
        print(f"values = {json.dumps(item['values'])}")
        print()
    for item in RENAMED:
        print("[[renamed]]")
        for name in ("key", "new", "since", "source"):
            print(f"{name} = {json.dumps(item[name])}")
        print()
    print("# zero_optimization keys DeepSpeed reads only when ZeRO-3 runs (GD304, GD311): ignored at stages 0-2.")
    print("[stage3_only]")
    print(f"keys = {toml_list(zero3)}")
    print()
    for item in removed:
        print("[[removed]]")
        print(f"key = {json.dumps(item['key'])}")
        print(f"since = {json.dumps(item['since'])}")
        print(f"message = {json.dumps(item['message'])}")
        print()


if __name__ == "__main__":
    main()
