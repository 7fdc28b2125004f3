"""How a script's DataLoaders split the data between ranks (torch.utils.data): a DataLoader without a sampler reads
the whole data set in every rank; a `DistributedSampler` gives each rank its part, shuffled with `seed + epoch`, so
its `set_epoch(epoch)` must be called every epoch or every epoch repeats the first one's order. Frameworks do both
themselves: the Hugging Face Trainer (and TRL's trainers built on it), Lightning, accelerate's `prepare` and
DeepSpeed's own loader (`deepspeed.initialize(training_data=…)`); HF datasets' `shard`/`split_dataset_by_node` and
webdataset's `split_by_node` split the data before any loader. Found statically; the script is never run."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional

from gpudoctor.readers.python.names import literal, qualified_name, segment
from gpudoctor.readers.python.tree import Tree

LOADER = {"torch.utils.data.DataLoader"}
ITERABLE_BASES = ("IterableDataset", "IterDataPipe", "WebDataset", "IterableWrapper")
# calls that give each rank its part of the data, or a framework that builds (or re-samples) the loaders itself
SHARDING = {"datasets.distributed.split_dataset_by_node", "webdataset.split_by_node", "webdataset.shardlists"}
FRAMEWORK_TRAINERS = ("transformers.", "trl.", "lightning.", "pytorch_lightning.", "accelerate.")
SAMPLER_POSITION, BATCH_SAMPLER_POSITION = 3, 4  # DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler…)
# calls a loader or a sampler may go through without leaving the script's sight
BUILTINS = {"enumerate", "iter", "len", "zip", "print", "next", "list", "tqdm", "DataLoader", "DistributedSampler"}


def _keyword(call: ast.Call, name: str, position: Optional[int] = None) -> Optional[ast.AST]:
    found = next((kw.value for kw in call.keywords if kw.arg == name), None)
    if found is None and position is not None and len(call.args) > position:
        return call.args[position]
    return found


def _target_name(node: ast.AST) -> Optional[str]:
    """`x` of `x = …` and `self.x = …`."""
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


class _Data:
    def __init__(self, tree: Tree, lines: List[str], aliases: Dict[str, str]):
        self.index, self.lines, self.aliases = tree, lines, aliases
        self.values: Dict[str, List[ast.AST]] = {}  # name (or attribute) → the values assigned to it
        for node in tree.walk():
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    name = _target_name(target)
                    if name:
                        self.values.setdefault(name, []).append(node.value)
        self.loader_names = {name for name, values in self.values.items()
                             if any(isinstance(v, ast.Call) and self.qualified(v.func) in LOADER for v in values)}
        self.iterable_classes = {node.name for node in tree.walk() if isinstance(node, ast.ClassDef)
                                 and any((qualified_name(base, aliases) or "").endswith(ITERABLE_BASES)
                                         for base in node.bases)}

    def qualified(self, node: ast.AST) -> str:
        return qualified_name(node, self.aliases) or ""

    def call_behind(self, node: Optional[ast.AST]) -> Optional[ast.Call]:
        """The call an expression is, or the one call its name (or attribute) is assigned from."""
        if isinstance(node, ast.Call):
            return node
        name = _target_name(node) if node is not None else None
        calls = [value for value in self.values.get(name or "", []) if isinstance(value, ast.Call)]
        return calls[0] if len(calls) == 1 else None

    def option(self, call: ast.Call, name: str, position: int) -> Optional[ast.AST]:
        """A DataLoader option given by keyword, position or a `**options` dict the script writes out; a Starred
        placeholder (`…`) when a `**dict` may hold it and the script does not show it."""
        found = _keyword(call, name, position)
        for spread in (kw.value for kw in call.keywords if kw.arg is None):
            if found is not None:
                break
            dicts = [value for value in self.values.get(_target_name(spread) or "", []) if isinstance(value, ast.Dict)]
            found = next((value for d in dicts for key, value in zip(d.keys, d.values)
                          if key is not None and literal(key) == name), None)
            if found is None:
                found = ast.Starred(value=spread, ctx=ast.Load())
        return found

    def sampler_kind(self, node: Optional[ast.AST]) -> str:
        if node is None or literal(node) is None:
            return "none"
        if isinstance(node, ast.Starred):
            return "unknown"
        call = self.call_behind(node)
        if call is None:
            return "unknown"
        return "distributed" if self.qualified(call.func).endswith("DistributedSampler") else "other"

    def iterable(self, dataset: Optional[ast.AST]) -> bool:
        """An IterableDataset (a class of the script that derives from one, or a streaming `load_dataset`): it has
        no sampler, and how it splits between ranks is its own code."""
        call = self.call_behind(dataset)
        if call is None:
            return False
        name = self.qualified(call.func)
        streaming = any(kw.arg == "streaming" and literal(kw.value) is True for kw in call.keywords)
        return streaming or name.split(".")[-1] in self.iterable_classes or name.endswith(ITERABLE_BASES)

    def training(self, call: ast.Call, target: Optional[str]) -> bool:
        """A loader meant for training: it shuffles, or its name or its data set's says train."""
        dataset = _keyword(call, "dataset", 0)
        names = [target or "", _target_name(dataset) if dataset is not None else ""]
        return literal(_keyword(call, "shuffle", 2)) is True or any("train" in (n or "").lower() for n in names)

    def loaders(self) -> List[dict]:
        targets = {id(node.value): _target_name(node.targets[0]) for node in self.index.walk()
                   if isinstance(node, ast.Assign) and len(node.targets) == 1}
        found = []
        for call in self.index.walk():
            if not isinstance(call, ast.Call) or self.qualified(call.func) not in LOADER:
                continue
            batch_sampler = self.option(call, "batch_sampler", BATCH_SAMPLER_POSITION)
            sampler = self.option(call, "sampler", SAMPLER_POSITION)
            given = batch_sampler is not None and literal(batch_sampler) is not None \
                and not (isinstance(batch_sampler, ast.Starred) and sampler is not None)
            kind = self.sampler_kind(batch_sampler if given else sampler)
            found.append({"line": call.lineno, "what": segment(self.lines, call, 70), "sampler": kind,
                          "training": self.training(call, targets.get(id(call))),
                          "iterable": self.iterable(_keyword(call, "dataset", 0))})
        return sorted(found, key=lambda e: e["line"])

    def samplers(self) -> List[dict]:
        """The DistributedSamplers made, with whether they shuffle (torch's default: True) and whether the sampler,
        or a loader, goes to code the script does not show (`escapes`: an imported `train(loader, sampler=…)` may
        call set_epoch there)."""
        found = []
        handed = self.handed_away()
        for node in self.index.walk():
            if isinstance(node, ast.Call) and self.qualified(node.func).endswith("DistributedSampler"):
                shuffle = _keyword(node, "shuffle", 3)
                names = {name for name, values in self.values.items() if any(v is node for v in values)}
                found.append({"line": node.lineno, "what": segment(self.lines, node, 70),
                              "shuffle": shuffle is None or literal(shuffle) is not False,
                              "escapes": bool(names & handed) or bool(self.loader_names & handed)})
        return sorted(found, key=lambda e: e["line"])

    def handed_away(self) -> set:
        """The names (and attributes) passed to a function the script does not define (builtins aside)."""
        defined = {node.name for node in self.index.walk() if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        handed = set()
        for node in self.index.walk():
            if not isinstance(node, ast.Call):
                continue
            callee = (self.qualified(node.func) or "").split(".")[-1]
            if callee in defined or callee in BUILTINS:
                continue
            for arg in list(node.args) + [kw.value for kw in node.keywords]:
                name = _target_name(arg)
                if name:
                    handed.add(name)
        return handed

    def sharded_by(self) -> Optional[dict]:
        """The first call that splits the data between ranks before any loader, or a framework that makes the loaders
        itself (see the module docstring)."""
        for node in self.index.walk():
            if not isinstance(node, ast.Call):
                continue
            name = self.qualified(node.func)
            short = name.split(".")[-1]
            frameworks = name.startswith(FRAMEWORK_TRAINERS) and (short.endswith("Trainer") or short in (
                "Accelerator", "Fabric"))
            deepspeed_loader = name == "deepspeed.initialize" and _keyword(node, "training_data") is not None
            datasets_shard = short == "shard" and {kw.arg for kw in node.keywords} >= {"num_shards", "index"}
            if name in SHARDING or frameworks or deepspeed_loader or datasets_shard:
                return {"line": node.lineno, "what": segment(self.lines, node, 60)}
        return None

    def epoch_loop(self) -> Optional[dict]:
        """A loop over epochs: `for epoch in …`, or a loop whose range names an epoch count."""
        for node in self.index.walk():
            if isinstance(node, (ast.For, ast.AsyncFor)) and "epoch" in segment(self.lines, node.target, 40).lower() \
                    + segment(self.lines, node.iter, 60).lower():
                return {"line": node.lineno, "what": f"for {segment(self.lines, node.target, 30)} in "
                                                     f"{segment(self.lines, node.iter, 40)}"}
        return None


def data_splitting(tree: Tree, lines: List[str], aliases: Dict[str, str]) -> Optional[dict]:
    """The script's `data` facts: its DataLoaders (`sampler`: `none`, `distributed`, `other`, `unknown`;
    `training`; `iterable`), the DistributedSamplers it makes (`shuffle`), whether it calls `set_epoch`, its epoch
    loop and what splits the data for it (`sharded_by`). None for a script without a DataLoader."""
    data = _Data(tree, lines, aliases)
    loaders = data.loaders()
    if not loaders:
        return None
    set_epoch = any(isinstance(node, ast.Attribute) and node.attr == "set_epoch" for node in tree.walk())
    return {"loaders": loaders, "samplers": data.samplers(), "set_epoch": set_epoch,
            "epoch_loop": data.epoch_loop(), "sharded_by": data.sharded_by()}
