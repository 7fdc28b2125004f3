"""What a script asks of the GPU: precision (bf16/fp16/fp8), tensor parallelism, DataLoader workers, and whether
it trains PEFT adapters (LoRA and the other PEFT methods: only the adapters are trainable).

Requests are taken from all code that can run — module level and every function or method that is referenced
somewhere (called, passed to `mp.spawn`, decorated), not from functions nothing refers to. Only definite requests
count: `bf16=True`, `torch.bfloat16`, `precision="bf16-mixed"`; `bf16=args.bf16` or a value chosen from the compute
capability is not a request. `bf16=torch.cuda.is_bf16_supported()` is one: it says True on a T4 (emulation).
"""

from __future__ import annotations

import ast
from typing import Any, Dict, List, Optional, Set, Union

from gpudoctor.readers.python.names import NO_VALUE, canonical, dotted, imports_of, literal, qualified_name, segment
from gpudoctor.readers.python.tree import Tree

DTYPE_KEYWORDS = {"torch_dtype", "dtype", "compute_dtype", "bnb_4bit_compute_dtype", "param_dtype", "reduce_dtype",
                  "autocast_dtype", "params_dtype", "pipeline_dtype", "mixed_precision_dtype", "amp_dtype"}
BF16_PRECISIONS = {"bf16", "bf16-mixed", "bf16-true", "bf16_mixed", "bfloat16"}
FP16_PRECISIONS = {"16", "16-mixed", "16-true", "fp16", "fp16-mixed", "half", "float16"}
FP8_PRECISIONS = {"fp8", "transformer-engine", "transformer-engine-float16", "fp8-mixed"}
TP_KEYWORDS = {"tensor_model_parallel_size", "tensor_parallelism", "tensor_parallel_size"}
FRAMEWORKS = {
    "megatron": "megatron", "nemo": "nemo", "nemo_run": "nemo_run", "transformer_engine": "transformer_engine",
    "deepspeed": "deepspeed", "lightning": "lightning", "pytorch_lightning": "lightning",
    "transformers": "transformers",
    "accelerate": "accelerate", "trl": "trl", "vllm": "vllm",
}


def _dtype(node: ast.AST, aliases: Dict[str, str]) -> Optional[str]:
    """'bf16' / 'fp16' / 'fp8' for torch dtypes and dtype strings."""
    name = dotted(node)
    if name:
        root, _, rest = name.partition(".")
        full = canonical(f"{aliases.get(root, root)}.{rest}" if rest else aliases.get(root, root)) or ""
        if full in ("torch.bfloat16",):
            return "bf16"
        if full in ("torch.float16", "torch.half"):
            return "fp16"
        if full.startswith("torch.float8_"):
            return "fp8"
    value = literal(node)
    if isinstance(value, str):
        text = value.lower()
        if text in ("bfloat16", "bf16", "torch.bfloat16"):
            return "bf16"
        if text in ("float16", "fp16", "half", "torch.float16"):
            return "fp16"
    return None


def _precision_kind(text: str) -> Optional[str]:
    """'bf16' / 'fp16' / 'fp8' for a precision setting's text ("bf16-mixed", "16", "transformer-engine" …)."""
    if text in BF16_PRECISIONS or text.startswith("bf16"):
        return "bf16"
    if text in FP16_PRECISIONS:
        return "fp16"
    if text in FP8_PRECISIONS or text.startswith("fp8"):
        return "fp8"
    return None


def _small(node: ast.AST) -> bool:
    return (getattr(node, "end_lineno", 0) or 0) - (getattr(node, "lineno", 0) or 0) < 20


# the RequestFinder method that reads the value of each keyword argument and of each attribute assigned
KEYWORD_FORMS = {**dict.fromkeys(("bf16", "bf16_full_eval"), "bf16_flag"),
                 **dict.fromkeys(("fp16", "fp16_full_eval"), "fp16_flag"), "fp8": "fp8_value",
                 **dict.fromkeys(("precision", "mixed_precision"), "precision_value"),
                 **dict.fromkeys(DTYPE_KEYWORDS, "dtype_value"), **dict.fromkeys(TP_KEYWORDS, "tensor_parallel_value")}
ATTRIBUTE_FORMS = {"bf16": "bf16_flag", "fp16": "fp16_flag", "fp8": "fp8_value",
                   **dict.fromkeys(("precision", *DTYPE_KEYWORDS), "precision_attribute"),
                   **dict.fromkeys(TP_KEYWORDS, "tensor_parallel_value")}
# the RequestFinder method that reads each kind of node, and those that recognise a request in a call, in the order
# they are tried
NODE_FORMS = {"Call": "call", "Assign": "attribute_assign", "AnnAssign": "attribute_assign", "Dict": "config_dict",
              "IfExp": "if_expression"}
CALL_FORMS = ("positional_dtypes", "cast_method", "nemo_recipe", "fp8_autocast", "float8_training", "autocast",
              "workers", "adapters")
# PEFT calls that make a model whose only trainable parameters are adapters (peft's own API; unsloth wraps it)
ADAPTER_CALLS = {"peft.get_peft_model", "peft.get_peft_config", "peft.inject_adapter_in_model"}


class RequestFinder:
    def __init__(self, tree: Tree, lines: List[str], path: str):
        self.index = tree  # the file's one walk
        self.tree = tree.module
        self.lines = lines
        self.path = path
        self.aliases: Dict[str, str] = {}
        imports_of(tree.body, self.aliases)
        self.constants = _bool_constants(tree.body)
        self.found: Dict[str, List[dict]] = {"bf16": [], "fp16": [], "fp8": [], "tensor_parallel": [], "workers": [],
                                             "adapters": []}
        self.frameworks: Set[str] = set()

    def run(self) -> Dict[str, List[dict]]:
        """Every node depth first but the functions and classes nothing refers to (dead code as far as this script
        goes), each read by its kind's method (NODE_FORMS)."""
        self.collect_frameworks()
        referenced = _referenced_names(self.index)

        def dead(node: ast.AST) -> bool:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return not (node.decorator_list or node.name in referenced or node.name.startswith("__"))
            return isinstance(node, ast.ClassDef) and node.name not in referenced and not node.decorator_list

        for node in self.index.preorder(dead):
            form = NODE_FORMS.get(type(node).__name__)
            if form:
                getattr(self, form)(node)
        return self.found

    def bf16_supported_call(self, node: ast.AST) -> bool:
        """A `….is_bf16_supported()` call in a short expression."""
        return _small(node) and any(isinstance(sub, ast.Call) and (dotted(sub.func) or "").endswith("is_bf16_supported")
                                    for sub in self.index.walk(node))

    def collect_frameworks(self) -> None:
        for node in self.index.walk():
            names: List[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                if top in FRAMEWORKS:
                    self.frameworks.add(FRAMEWORKS[top])
                if name.startswith("lightning.fabric"):
                    self.frameworks.add("lightning")

    def add(self, kind: str, node: Union[ast.expr, ast.stmt], what: str, **extra: Any) -> None:
        entry = {"source": self.path, "line": node.lineno, "what": what}
        entry.update(extra)
        if any(e["line"] == entry["line"] and e["what"] == what for e in self.found[kind]):
            return
        self.found[kind].append(entry)

    def qualified(self, node: ast.AST) -> str:
        return qualified_name(node, self.aliases)

    def truthy(self, node: ast.AST) -> Optional[bool]:
        value = literal(node)
        if value is NO_VALUE and isinstance(node, ast.Name):
            value = self.constants.get(node.id, NO_VALUE)
        if value is NO_VALUE:
            if self.bf16_supported_call(node) and isinstance(node, ast.Call):
                return True
            return None
        if isinstance(value, str):
            return value.strip().lower() in ("true", "1", "yes", "on")
        return bool(value) if isinstance(value, (bool, int)) else None

    def call(self, call: ast.Call) -> None:
        """What one call asks for: its keywords (`keyword`), then each recogniser of CALL_FORMS."""
        name = self.qualified(call.func)
        short = name.rsplit(".", 1)[-1] if name else (call.func.attr if isinstance(call.func, ast.Attribute) else "")
        label = short or "call"
        for kw in call.keywords:
            if kw.arg is not None:
                self.keyword(label, kw, call)
        for form in CALL_FORMS:
            getattr(self, form)(call, name, short, label)

    def positional_dtypes(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """model.to(torch.bfloat16), torch.autocast("cuda", torch.bfloat16)."""
        for arg in call.args:
            kind = _dtype(arg, self.aliases) if not isinstance(arg, ast.Constant) or short == "to" else None
            if kind:
                self.add(kind, call, f"{label}({segment(self.lines, arg, 30)})")

    def cast_method(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """model.bfloat16(), model.half()."""
        kind = {"bfloat16": "bf16", "half": "fp16"}.get(call.func.attr) if isinstance(call.func, ast.Attribute) \
            and not call.args and not call.keywords else None
        if kind:
            self.add(kind, call, f"{segment(self.lines, call, 40)}")

    def nemo_recipe(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """NeMo's precision recipes: bf16_mixed(), fp16_with_fp8_mixed() …"""
        if name.startswith("nemo.") or ".recipes.precision" in name.lower():
            for kind in ("bf16", "fp8", "fp16"):
                if kind in short:
                    self.add(kind, call, f"{short}()")

    def fp8_autocast(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """Transformer Engine's fp8_autocast(), unless enabled=False."""
        if short == "fp8_autocast" and ("transformer_engine" in name or name == short):
            enabled = next((kw.value for kw in call.keywords if kw.arg == "enabled"), None)
            if enabled is None or self.truthy(enabled):
                self.add("fp8", call, segment(self.lines, call, 60))

    def float8_training(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """torchao.float8.convert_to_float8_training()."""
        if short == "convert_to_float8_training":
            self.add("fp8", call, f"{short}()")

    def autocast(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """torch.autocast("cuda") without a dtype: float16 on CUDA."""
        if short != "autocast" or not (name.startswith("torch") or name == "autocast") or call.args[1:] \
                or any(kw.arg == "dtype" or kw.arg == "enabled" and self.truthy(kw.value) is False
                       for kw in call.keywords):
            return
        device = literal(call.args[0]) if call.args else next(
            (literal(kw.value) for kw in call.keywords if kw.arg == "device_type"), "cuda")
        if name.startswith("torch.cuda.amp") or device == "cuda":
            self.add("fp16", call, f"{segment(self.lines, call, 50)} (float16 by default on CUDA)")

    def workers(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """DataLoader(num_workers=N) (the sixth positional argument), TrainingArguments(dataloader_num_workers=N)."""
        if short != "DataLoader" and not name.endswith("TrainingArguments"):
            return
        keyword = "num_workers" if short == "DataLoader" else "dataloader_num_workers"
        node = next((kw.value for kw in call.keywords if kw.arg == keyword), None)
        if node is None and short == "DataLoader" and len(call.args) > 5:
            node = call.args[5]
        value = literal(node) if node is not None else NO_VALUE
        if value is NO_VALUE and isinstance(node, ast.Name):
            value = self.constants.get(node.id, NO_VALUE)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.add("workers", call, f"{label}({keyword}={value})", count=value)

    def adapters(self, call: ast.Call, name: str, short: str, label: str) -> None:
        """A PEFT method's config (`LoraConfig(...)`, `IA3Config(...)`: a `peft.*Config` but the base PeftConfig),
        `get_peft_model(...)` (peft's, or unsloth's `FastLanguageModel.get_peft_model`),
        `PeftModel.from_pretrained(..., is_trainable=True)`; and TRL's `get_peft_config(model_args)`, which makes one
        only when the command line says `--use_peft` (recorded with that `option`)."""
        root = name.split(".", 1)[0]
        if root == "trl" and short == "get_peft_config":
            self.add("adapters", call, segment(self.lines, call, 60), option="--use_peft")
            return
        trainable = next((kw.value for kw in call.keywords if kw.arg == "is_trainable"), None)
        if (root == "peft" and short.endswith("Config") and short != "PeftConfig") or name in ADAPTER_CALLS \
                or (root == "unsloth" and short == "get_peft_model") \
                or (root == "peft" and short == "from_pretrained" and trainable is not None and self.truthy(trainable)):
            self.add("adapters", call, segment(self.lines, call, 60))

    def keyword(self, label: str, kw: ast.keyword, call: ast.Call) -> None:
        """A keyword argument that asks for a precision or tensor parallelism (KEYWORD_FORMS: the method that reads
        each keyword's value)."""
        form = KEYWORD_FORMS.get(kw.arg or "")
        found = getattr(self, form)(kw.value) if form else None
        if found:
            kind, note, extra = found
            self.add(kind, kw.value, f"{label}({kw.arg}={segment(self.lines, kw.value, 40)}){note}", **extra)

    def bf16_flag(self, value: ast.AST) -> Optional[tuple]:
        """`bf16=True` (`bf16=torch.cuda.is_bf16_supported()` too: True on a T4)."""
        if not self.truthy(value):
            return None
        return "bf16", " — True on a T4 through emulation" if self.bf16_supported_call(value) else "", {}

    def fp16_flag(self, value: ast.AST) -> Optional[tuple]:
        return ("fp16", "", {}) if self.truthy(value) else None

    @staticmethod
    def fp8_value(value: ast.AST) -> Optional[tuple]:
        """`fp8=` anything literal but off (`None`, `False`, `0`, `""`, "none", "no")."""
        known = literal(value)
        off = known is NO_VALUE or known in (None, False, 0, "", "none", "None", "no")
        return None if off else ("fp8", "", {})

    @staticmethod
    def precision_value(value: ast.AST) -> Optional[tuple]:
        """`precision="bf16-mixed"`, `mixed_precision="fp16"`, `precision=16` …"""
        known = literal(value)
        kind = _precision_kind(str(known).lower()) if known is not NO_VALUE else None
        return (kind, "", {}) if kind else None

    def dtype_value(self, value: ast.AST) -> Optional[tuple]:
        kind = _dtype(value, self.aliases)
        return (kind, "", {}) if kind else None

    def tensor_parallel_value(self, value: ast.AST) -> Optional[tuple]:
        size = literal(value)
        if isinstance(size, int) and not isinstance(size, bool) and size > 1:
            return "tensor_parallel", "", {"size": size, "frameworks": sorted(self.frameworks)}
        return None

    def attribute_assign(self, node: Union[ast.Assign, ast.AnnAssign]) -> None:
        """`args.bf16 = True`, `cfg.tensor_model_parallel_size = 2`, `trainer.precision = "bf16-mixed"`
        (ATTRIBUTE_FORMS: the method that reads the value of each attribute)."""
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        if value is None:  # `x: int`
            return
        for target in targets:
            form = ATTRIBUTE_FORMS.get(target.attr) if isinstance(target, ast.Attribute) else None
            found = getattr(self, form)(value) if form else None
            if found:
                kind, _, extra = found
                self.add(kind, node, f"{segment(self.lines, target, 50)} = {segment(self.lines, value, 30)}", **extra)

    def precision_attribute(self, value: ast.AST) -> Optional[tuple]:
        """A dtype (`torch.bfloat16`), or a precision's text ("bf16-mixed")."""
        kind = _dtype(value, self.aliases)
        known = literal(value)
        if kind is None and isinstance(known, str):
            kind = _precision_kind(known.lower())
        return (kind, "", {}) if kind else None

    def config_dict(self, node: ast.Dict) -> None:
        """A DeepSpeed-style config written in the script: {"bf16": {"enabled": True}}."""
        for key, value in zip(node.keys, node.values):
            if key is None or not isinstance(value, ast.Dict):  # `**other`, or not a section
                continue
            name = literal(key)
            if name in ("bf16", "fp16", "bfloat16"):
                for inner_key, inner_value in zip(value.keys, value.values):
                    if inner_key is not None and literal(inner_key) == "enabled" and self.truthy(inner_value):
                        kind = "fp16" if name == "fp16" else "bf16"
                        self.add(kind, key, f'{{"{name}": {{"enabled": {segment(self.lines, inner_value, 10)}}}}}')

    def if_expression(self, node: ast.IfExp) -> None:
        """`torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16` picks bf16 on a T4."""
        if _dtype(node.body, self.aliases) == "bf16" and self.bf16_supported_call(node.test):
            self.add("bf16", node, f"{segment(self.lines, node, 70)} — is_bf16_supported() is True on a T4 "
                                   "through emulation")


def _referenced_names(tree: Tree) -> Set[str]:
    names: Set[str] = set()
    for node in tree.walk():
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 60:
            names.add(node.value)
    return names


def _bool_constants(body: List[ast.stmt]) -> Dict[str, Any]:
    """Module-level names assigned exactly one literal (`USE_BF16 = True`, `NUM_WORKERS = 4`)."""
    values: Dict[str, Any] = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, literal(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, literal(node.value)
        else:
            continue
        values[name] = value if name not in values or values[name] == value else NO_VALUE
    return values


def find_requests(tree: Tree, lines: List[str], path: str) -> tuple:
    finder = RequestFinder(tree, lines, path)
    found = finder.run()
    return found, sorted(finder.frameworks)
