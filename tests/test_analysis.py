"""The static script analyser (gpudoctor.readers.python): what runs at module level, guards, call paths, CUDA ordering,
nemo_run recipes, precision requests, suppressions, and bad input that must never raise or hang."""

import ast
import sys
import textwrap
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudoctor.readers.python.script import analyse
from gpudoctor.suppress import find_suppressions


def run(source: str, path: str = "train.py"):
    return analyse(path, textwrap.dedent(source).lstrip("\n").encode())


def script(source: str) -> dict:
    result = run(source)
    assert result.script is not None, result.problems
    return result.script


def unguarded(source: str) -> list:
    return [s for s in script(source)["process_starts"] if not s["guarded"]]


def lines(starts) -> list:
    return [s["line"] for s in starts]


# ---------------------------------------------------------------- imports, aliases, guards ----------------------
@pytest.mark.parametrize("imports,call", [
    ("import torch.multiprocessing as mp", "mp.spawn(f, nprocs=2)"),
    ("from torch.multiprocessing import spawn", "spawn(f, nprocs=2)"),
    ("from torch.multiprocessing import spawn as launch", "launch(f, nprocs=2)"),
    ("import torch", "torch.multiprocessing.spawn(f, nprocs=2)"),
    ("import torch.multiprocessing", "torch.multiprocessing.spawn(f, nprocs=2)"),
    ("from torch import multiprocessing as tmp", "tmp.start_processes(f, nprocs=2)"),
    ("from multiprocessing import Pool", "Pool(4)"),
    ("from multiprocessing import Pool as P", "P(4)"),
    ("import multiprocessing", "multiprocessing.Pool()"),
    ("import multiprocessing as mp", "mp.Process(target=f).start()"),
    ("from concurrent.futures import ProcessPoolExecutor", "ProcessPoolExecutor(2)"),
    ("import nemo_run as run", "run.run(recipe)"),
    ("import nemo_run as run", "run.Experiment('x')"),
])
def test_import_spellings_resolve(imports, call):
    starts = unguarded(f"{imports}\ndef f(i):\n    pass\nrecipe = None\n{call}\n")
    assert lines(starts) == [5], starts


def test_unrelated_names_are_not_process_starts():
    assert unguarded("""
        from mylib import spawn, Pool
        def f():
            pass
        spawn(f)
        Pool(4)
        import subprocess
        subprocess.run(["python", "other.py"])
        import torch.distributed as dist
        dist.init_process_group("nccl")
        import multiprocessing as mp
        mp.set_start_method("spawn")
        from accelerate import notebook_launcher
        notebook_launcher(f, num_processes=2)
    """) == []


@pytest.mark.parametrize("guard", [
    'if __name__ == "__main__":',
    "if __name__ == '__main__':",
    'if "__main__" == __name__:',
    "if '__main__' == __name__:",
    'if __name__ == "__main__" and True:',
    'if __name__ in ("__main__",):',
])
def test_guard_spellings(guard):
    found = script(f"import torch.multiprocessing as mp\n{guard}\n    mp.spawn(print, nprocs=2)\n")
    assert [s["guarded"] for s in found["process_starts"]] == [True]
    assert found["main_guard_line"] == 2


def test_inverted_guard_protects_the_else_branch_only():
    starts = script("""
        import torch.multiprocessing as mp
        if __name__ != "__main__":
            mp.spawn(print, nprocs=1)
        else:
            mp.spawn(print, nprocs=2)
    """)["process_starts"]
    assert [(s["line"], s["guarded"]) for s in starts] == [(3, False), (5, True)]


def test_guard_present_but_spawn_above_it():
    starts = script("""
        import torch.multiprocessing as mp
        def main():
            mp.spawn(print, nprocs=2)
        mp.spawn(print, nprocs=2)
        if __name__ == "__main__":
            main()
    """)["process_starts"]
    assert [(s["line"], s["guarded"]) for s in starts] == [(3, True), (4, False)]


def test_main_called_unguarded_gives_the_call_path():
    starts = unguarded("""
        import torch.multiprocessing as mp
        def launch():
            mp.spawn(print, nprocs=2)
        def main():
            launch()
        main()
    """)
    assert len(starts) == 1
    assert starts[0]["line"] == 3 and starts[0]["column"] == 5
    assert starts[0]["path"] == ["<module>:6", "main:5", "launch:3"]
    assert starts[0]["start_method"] == "spawn"


def test_functions_never_called_produce_nothing():
    assert script("""
        import torch.multiprocessing as mp
        from torch.utils.data import DataLoader
        def train(ds):
            for batch in DataLoader(ds, num_workers=4):
                pass
        def main():
            mp.spawn(print, nprocs=2)
            train([])
        def helper():
            main()
    """)["process_starts"] == []


def test_same_start_reached_guarded_and_unguarded_is_reported_unguarded():
    starts = script("""
        import torch.multiprocessing as mp
        def main():
            mp.spawn(print, nprocs=2)
        if __name__ == "__main__":
            main()
        main()
    """)["process_starts"]
    assert [(s["line"], s["guarded"], s["path"][0]) for s in starts] == [(3, False, "<module>:6")]


def test_recursion_and_mutual_recursion_terminate():
    starts = unguarded("""
        import torch.multiprocessing as mp
        def a(n):
            if n:
                b(n - 1)
            mp.spawn(print, nprocs=2)
        def b(n):
            a(n)
        a(3)
    """)
    assert lines(starts) == [5]


# ---------------------------------------------------------------- classes, wrappers, threads -------------------
def test_class_methods_called_at_module_level():
    starts = unguarded("""
        import torch.multiprocessing as mp
        class Runner:
            def __init__(self, n):
                self.n = n
            def run(self):
                self._launch()
            def _launch(self):
                mp.spawn(print, nprocs=self.n)
            def unused(self):
                mp.spawn(print, nprocs=1)
        Runner(2).run()
        runner = Runner(2)
        runner.run()
    """)
    assert lines(starts) == [8]
    assert starts[0]["path"] == ["<module>:11", "Runner.run:6", "Runner._launch:8"]


def test_process_subclass_started_at_module_level():
    starts = unguarded("""
        import multiprocessing as mp
        class Worker(mp.Process):
            def run(self):
                pass
        w = Worker()
        w.start()
        idle = Worker()
    """)
    assert lines(starts) == [6]


def test_process_object_needs_start():
    assert lines(unguarded("""
        from multiprocessing import Process
        p = Process(target=print)
        q = Process(target=print)
        q.start()
    """)) == [4]


def test_cli_wrappers_call_their_function():
    starts = unguarded("""
        import fire
        import torch.multiprocessing as mp
        def main():
            mp.spawn(print, nprocs=2)
        fire.Fire(main)
    """)
    assert starts[0]["path"] == ["<module>:5", "main:4"]


def test_typer_app_runs_its_commands():
    starts = unguarded("""
        import typer
        from multiprocessing import Pool
        app = typer.Typer()
        @app.command()
        def preprocess():
            with Pool(4) as pool:
                pool.map(str, [1])
        app()
    """)
    assert lines(starts) == [6]


def test_thread_target_runs_in_this_process():
    assert lines(unguarded("""
        import threading
        import torch.multiprocessing as mp
        def work():
            mp.spawn(print, nprocs=2)
        threading.Thread(target=work).start()
    """)) == [4]


# ---------------------------------------------------------------- DataLoader ------------------------------------
def test_dataloader_iterated_at_module_level_counts():
    starts = unguarded("""
        from torch.utils.data import DataLoader
        loader = DataLoader([1, 2], num_workers=2)
        for batch in loader:
            pass
    """)
    assert lines(starts) == [3] and starts[0]["call"] == "torch.utils.data.DataLoader"
    assert starts[0]["start_method"] == "default"


def test_dataloader_only_constructed_does_not_count():
    assert unguarded("""
        import torch
        loader = torch.utils.data.DataLoader([1, 2], num_workers=8)
        n = len(loader)
    """) == []


@pytest.mark.parametrize("workers,fires", [("0", False), ("2", True), ("N", True), ("M", False),
                                           ("args.workers", False), ("os.cpu_count()", False), ("2 * N", True)])
def test_dataloader_num_workers_must_be_known_and_positive(workers, fires):
    source = f"""
        import os
        from torch.utils.data import DataLoader
        N = 4
        M = 0
        loader = DataLoader([1], num_workers={workers})
        for batch in loader:
            pass
    """
    assert bool(unguarded(source)) is fires


def test_dataloader_module_constant_assigned_twice_is_unknown():
    assert unguarded("""
        from torch.utils.data import DataLoader
        W = 4
        W = 0
        for batch in DataLoader([1], num_workers=W):
            pass
    """) == []


PASSED_LOADER = """
    from torch.utils.data import DataLoader


    class Trainer:
        def __init__(self, model, loader):
            self.model = model

        def fit(self, epochs, loader, val_loader=None):
            for epoch in range(epochs):
                one_epoch(self.model, loader)


    def one_epoch(model, loader):
        for images, labels in loader:
            model(images)


    def train_model(loader, num_classes, epochs=3):
        for epoch in range(epochs):
            for images, labels in loader:
                pass


    def pairs(a, b):
        for x, y in zip(a, b):
            pass


    train_loader = DataLoader(range(8), batch_size=4, num_workers={workers})
    {call}
"""


@pytest.mark.parametrize("call,expected", [
    ("train_model(train_loader, 10)", [20]),
    ("train_model(num_classes=10, loader=train_loader)", [20]),
    ("Trainer(None, train_loader).fit(2, train_loader)", [14]),  # through a method into a function
    ("train_model(range(3), 10)", []),  # not a DataLoader
    ("one_epoch(None, loader=None)", []),
    ("pairs(range(3), train_loader)", [25]),  # the second of zip(a, b)
])
def test_a_dataloader_passed_to_a_function_that_iterates_it(call, expected):
    starts = unguarded(PASSED_LOADER.format(workers=4, call=call))
    assert lines(starts) == expected, starts
    if expected:
        assert "passed as `" in starts[0]["what"] and starts[0]["path"][0] == "<module>:30"
    assert unguarded(PASSED_LOADER.format(workers=0, call=call)) == []
    guarded = PASSED_LOADER.format(workers=4, call='if __name__ == "__main__":\n        ' + call)
    assert unguarded(guarded) == []


@pytest.mark.parametrize("iteration", [
    "for i, b in enumerate(loader):\n    pass",
    "for b in tqdm(loader):\n    pass",
    "batch = next(iter(loader))",
    "batches = list(loader)",
    "xs = [b for b in loader]",
    "for a, b in zip(loader, loader):\n    pass",
])
def test_dataloader_iteration_forms(iteration):
    source = "from tqdm import tqdm\nfrom torch.utils.data import DataLoader\n" \
             "loader = DataLoader([1], batch_size=1, num_workers=3)\n" + iteration + "\n"
    starts = unguarded(source)
    assert lines(starts) == [4], starts


def test_dataloader_positional_workers_and_context():
    starts = script("""
        import multiprocessing as mp
        from torch.utils.data import DataLoader
        a = DataLoader([1], 1, False, None, None, 2)
        b = DataLoader([1], num_workers=2, multiprocessing_context="spawn")
        c = DataLoader([1], num_workers=2, multiprocessing_context=mp.get_context("fork"))
        for loader in (a,):
            pass
        list(a)
        list(b)
        list(c)
    """)["process_starts"]
    assert [(s["line"], s["start_method"]) for s in starts] == [(8, "default"), (9, "spawn"), (10, "fork")]


def test_dataloader_iterated_in_a_called_function_through_self():
    starts = unguarded("""
        from torch.utils.data import DataLoader
        class Trainer:
            def __init__(self):
                self.loader = DataLoader([1], num_workers=4)
            def train(self):
                for batch in self.loader:
                    pass
        Trainer().train()
    """)
    assert lines(starts) == [6]


def test_dataloader_returned_by_a_factory():
    assert lines(unguarded("""
        from torch.utils.data import DataLoader
        def make_loader():
            return DataLoader([1], num_workers=2)
        for batch in make_loader():
            pass
    """)) == [4]


def test_hf_trainer_with_dataloader_workers():
    starts = unguarded("""
        from transformers import Trainer, TrainingArguments
        args = TrainingArguments(output_dir="o", dataloader_num_workers=4)
        trainer = Trainer(model=None, args=args)
        trainer.train()
        quiet = Trainer(model=None, args=TrainingArguments(output_dir="o"))
        quiet.train()
    """)
    assert lines(starts) == [4]


# ---------------------------------------------------------------- Lightning --------------------------------------
@pytest.mark.parametrize("strategy,fires", [
    ('strategy="ddp"', False),
    ('strategy="ddp_spawn"', True),
    ('accelerator="ddp_spawn"', True),
    ('distributed_backend="ddp_spawn"', True),
    ('strategy="ddp_notebook"', False),
    ("strategy=DDPStrategy()", False),
    ('strategy=DDPStrategy(start_method="spawn")', True),
    ("strategy=DDPSpawnStrategy()", True),
    ("devices=2", False),
])
def test_lightning_strategies(strategy, fires):
    source = f"""
        import pytorch_lightning as pl
        from pytorch_lightning.strategies import DDPStrategy, DDPSpawnStrategy
        trainer = pl.Trainer(devices=2, {strategy})
        trainer.fit(model)
    """
    assert bool(unguarded(source)) is fires


def test_lightning_fit_iterates_its_dataloaders():
    starts = unguarded("""
        import lightning as L
        from torch.utils.data import DataLoader
        train = DataLoader([1], num_workers=4)
        L.Trainer(strategy="ddp").fit(model, train_dataloaders=train)
    """)
    assert lines(starts) == [4] and "trainer.fit" in starts[0]["what"]


# ---------------------------------------------------------------- start methods --------------------------------
def test_start_method_from_context_and_set_start_method():
    starts = script("""
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        ctx.Process(target=print).start()
        with mp.get_context("fork").Pool(2) as pool:
            pass
        mp.set_start_method("forkserver")
        mp.Pool(2)
    """)["process_starts"]
    assert [(s["line"], s["start_method"]) for s in starts] == [(3, "spawn"), (4, "fork"), (7, "forkserver")]
    assert "set_start_method" in starts[-1]["start_method_source"]


# ---------------------------------------------------------------- nemo_run ---------------------------------------
def test_nemo_run_recipe_devices_and_direct():
    found = script("""
        import nemo_run as run
        from nemo.collections import llm
        recipe = llm.qwen25_500m.pretrain_recipe(num_nodes=1, num_gpus_per_node=8)
        recipe.trainer.devices = 1
        run.run(recipe)
        run.run(recipe, direct=True)
        run.run(recipe, direct=False)
    """)
    runs = found["nemo_run_not_direct"]
    assert [(r["line"], r["devices"], r["direct_given"]) for r in runs] == [(5, 1, False), (7, 1, True)]
    assert runs[0]["evidence"] == "recipe.trainer.devices = 1 (line 4)"


def test_nemo_run_devices_through_a_configure_function_and_its_defaults():
    runs = script("""
        import nemo_run as run
        from nemo.collections import llm
        def configure_recipe(nodes: int = 1, gpus_per_node: int = 1):
            recipe = llm.llama3_8b.pretrain_recipe(num_nodes=nodes, num_gpus_per_node=gpus_per_node)
            return recipe
        def main():
            one = configure_recipe()
            run.run(one)
            eight = configure_recipe(gpus_per_node=8)
            run.run(eight)
        if __name__ == "__main__":
            main()
    """)["nemo_run_not_direct"]
    assert [(r["line"], r["devices"], r["num_nodes"]) for r in runs] == [(8, 1, 1), (10, 8, 1)]
    assert runs[0]["path"] == ["<module>:12", "main:8"] and runs[0]["guarded"]


def test_nemo_run_executor_kind():
    runs = script("""
        import nemo_run as run
        def executor():
            return run.SlurmExecutor(account="a")
        recipe = make()
        recipe.trainer.devices = 1
        run.run(recipe, executor=run.LocalExecutor(ntasks_per_node=1))
        run.run(recipe, executor=executor())
    """)["nemo_run_not_direct"]
    assert [r["executor"] for r in runs] == ["local", "SlurmExecutor"]


# ---------------------------------------------------------------- CUDA_VISIBLE_DEVICES --------------------------
def test_cvd_after_cuda_init_at_module_level():
    late = script("""
        import os
        import torch
        torch.manual_seed(0)
        torch.cuda.manual_seed_all(0)
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        n = torch.cuda.device_count()
        os.environ["CUDA_VISIBLE_DEVICES"] = "1"
    """)["cuda_visible_devices_late"]
    assert [(e["line"], e["cuda_line"], e["cuda_what"]) for e in late] == [(7, 6, "torch.cuda.device_count()")]


def test_cvd_ordering_through_functions():
    late = script("""
        import os
        import torch
        def setup():
            model.cuda()
        def pick(gpus):
            os.environ["CUDA_VISIBLE_DEVICES"] = gpus
        def main():
            pick("0")
            setup()
            pick("1")
        if __name__ == "__main__":
            main()
    """)["cuda_visible_devices_late"]
    assert len(late) == 1 and late[0]["line"] == 6
    assert late[0]["cuda_what"] == "model.cuda()" and late[0]["cuda_path"] == ["<module>:12", "main:9", "setup:4"]


@pytest.mark.parametrize("cuda", [
    'x = torch.zeros(2).to("cuda")',
    'x = torch.zeros(2, device="cuda:0")',
    "device = torch.device('cuda')\nx = model.to(device)",
    'x = model.to(f"cuda:{rank}")',
    'model = AutoModel.from_pretrained("m", device_map="auto")',
    "torch.cuda.set_device(0)",
    "ok = torch.cuda.is_bf16_supported()",
])
def test_cuda_initialisers(cuda):
    source = "import os\nimport torch\nfrom transformers import AutoModel\nrank = 0\n" + cuda + \
             "\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    assert len(script(source)["cuda_visible_devices_late"]) == 1


@pytest.mark.parametrize("not_cuda", [
    'device = torch.device("cuda")',
    "torch.cuda.manual_seed(0)",
    "scaler = torch.cuda.amp.GradScaler()",
    'x = model.to("cpu")',
    'm = AutoModel.from_pretrained("m", device_map="cpu")',
])
def test_not_cuda_initialisers(not_cuda):
    source = "import os\nimport torch\nfrom transformers import AutoModel\n" + not_cuda + \
             "\nos.environ['CUDA_VISIBLE_DEVICES'] = '1'\n"
    assert script(source)["cuda_visible_devices_late"] == []


@pytest.mark.parametrize("assignment", [
    "os.environ.update({'CUDA_VISIBLE_DEVICES': '1'})",
    "os.environ.update(CUDA_VISIBLE_DEVICES='1')",
    "os.putenv('CUDA_VISIBLE_DEVICES', '1')",
    "environ['CUDA_VISIBLE_DEVICES'] = '1'",
    "os.environ.setdefault('CUDA_VISIBLE_DEVICES', '1')",
    "for k, v in ENV.items():\n    os.environ[k] = v",
    "os.environ.update(ENV)",
    "os.environ[KEY] = '1'",
])
def test_cvd_assignment_forms(assignment):
    source = "import os\nfrom os import environ\nimport torch\nENV = {'CUDA_VISIBLE_DEVICES': '0'}\n" \
             "KEY = 'CUDA_VISIBLE_DEVICES'\ntorch.cuda.init()\n" + assignment + "\n"
    assert len(script(source)["cuda_visible_devices_late"]) == 1


def test_executor_env_vars_are_not_os_environ():
    assert script("""
        import torch
        torch.cuda.init()
        executor.env_vars["CUDA_VISIBLE_DEVICES"] = "0"
        env = {"CUDA_VISIBLE_DEVICES": "0"}
    """)["cuda_visible_devices_late"] == []


# ---------------------------------------------------------------- precision and tensor parallelism -------------
def requests(source: str) -> dict:
    return run(source).requests


def test_precision_requests_with_lines():
    found = requests("""
        import torch
        from transformers import TrainingArguments, AutoModelForCausalLM
        args = TrainingArguments(output_dir="o",
                                 bf16=True)
        model = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)
        model = model.to(torch.bfloat16)
        trainer = pl.Trainer(precision="bf16-mixed")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            pass
        ds = {"bf16": {"enabled": True}, "fp16": {"enabled": False}}
    """)
    assert [(r["line"], r["what"]) for r in found["bf16"]] == [
        (4, "TrainingArguments(bf16=True)"),
        (5, "from_pretrained(torch_dtype=torch.bfloat16)"),
        (6, "to(torch.bfloat16)"),
        (7, "Trainer(precision=\"bf16-mixed\")"),
        (8, "autocast(dtype=torch.bfloat16)"),
        (10, '{"bf16": {"enabled": True}}'),
    ]
    assert all(r["source"] == "train.py" for r in found["bf16"])
    assert found["fp16"] == []


def test_conditional_precision_is_not_a_request():
    found = requests("""
        import torch
        from transformers import TrainingArguments
        def main(args):
            use_bf16 = False
            if torch.cuda.get_device_capability()[0] >= 8:
                use_bf16 = True
            TrainingArguments(output_dir="o", bf16=use_bf16, fp16=not use_bf16)
            TrainingArguments(output_dir="o", bf16=args.bf16)
        main(None)
    """)
    assert found["bf16"] == [] and found["fp16"] == []


def test_is_bf16_supported_is_a_request_because_of_t4_emulation():
    found = requests("""
        import torch
        from transformers import TrainingArguments
        TrainingArguments(output_dir="o", bf16=torch.cuda.is_bf16_supported())
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    """)
    assert [r["line"] for r in found["bf16"]] == [3, 4]
    assert all("T4" in r["what"] for r in found["bf16"])


def test_fp8_requests():
    found = requests("""
        import transformer_engine.pytorch as te
        from nemo import lightning as nl
        from nemo.collections.llm.recipes.precision.mixed_precision import bf16_with_fp8_mixed
        with te.fp8_autocast(enabled=True):
            pass
        with te.fp8_autocast(enabled=False):
            pass
        plugin = nl.MegatronMixedPrecision(precision="bf16-mixed", fp8="hybrid")
        recipe.trainer.plugins = bf16_with_fp8_mixed()
        off = nl.MegatronMixedPrecision(precision="bf16-mixed", fp8=None)
    """)
    assert [r["line"] for r in found["fp8"]] == [4, 8, 9]
    assert [r["line"] for r in found["bf16"]] == [8, 9, 10]


def test_an_attribute_asks_as_the_keyword_of_the_same_name_does():
    """`cfg.fp8 = "no"` is off like `fp8="no"`; `trainer.precision = "fp8-hybrid"` asks for fp8 like
    `precision="fp8-hybrid"`."""
    found = requests("""
        cfg.fp8 = "no"
        trainer.precision = "fp8-hybrid"
        args.bf16 = True
        plugin = Plugin(fp8="no", precision="fp8-hybrid")
    """)
    assert [r["line"] for r in found["fp8"]] == [2, 4]
    assert [r["line"] for r in found["bf16"]] == [3]


def test_requests_in_dead_functions_are_ignored_but_spawn_targets_count():
    found = requests("""
        import torch.multiprocessing as mp
        from transformers import TrainingArguments
        def old_experiment():
            TrainingArguments(output_dir="o", bf16=True)
        def worker(rank):
            TrainingArguments(output_dir="o", fp16=True)
        if __name__ == "__main__":
            mp.spawn(worker, nprocs=2)
    """)
    assert found["bf16"] == [] and [r["line"] for r in found["fp16"]] == [6]


def test_tensor_parallel_evidence():
    found = requests("""
        from nemo.collections import llm
        recipe = llm.llama3_8b.pretrain_recipe(tensor_parallelism=2)
        recipe.trainer.strategy.tensor_model_parallel_size = 4
        recipe.trainer.strategy.tensor_model_parallel_size = 1
    """)
    tp = found["tensor_parallel"]
    assert [(r["line"], r["size"]) for r in tp] == [(2, 2), (3, 4)]
    assert tp[0]["frameworks"] == ["nemo"]
    assert script("import megatron.core\nimport transformer_engine\nimport nemo_run as run\n")["frameworks"] == [
        "megatron", "nemo_run", "transformer_engine"]


def test_workers_requests():
    found = requests("""
        from torch.utils.data import DataLoader
        from transformers import TrainingArguments
        N = 6
        DataLoader([1], num_workers=N)
        DataLoader([1], num_workers=0)
        TrainingArguments(output_dir="o", dataloader_num_workers=4)
    """)
    assert [(r["line"], r["count"]) for r in found["workers"]] == [(4, 6), (6, 4)]


def test_a_suppressed_request_is_left_out():
    found = requests("""
        from transformers import TrainingArguments
        TrainingArguments(output_dir="o", bf16=True)  # gpudoctor: ignore[GD201]
        TrainingArguments(output_dir="o", bf16=True)
    """)
    assert [r["line"] for r in found["bf16"]] == [3]


# ---------------------------------------------------------------- suppressions ----------------------------------
def test_suppression_comments():
    found = find_suppressions(textwrap.dedent("""
        a = 1  # gpudoctor: ignore[GD601]
        b = 2  # gpudoctor: ignore[GD601,GD602]
        c = 3  # gpudoctor: ignore[ gd601 , GD602 ]
        d = 4  # gpudoctor: ignore
        e = "# gpudoctor: ignore[GD603]"
        f = 5  # noqa  # GPUDOCTOR: IGNORE[GD999]
        g = 6  # gpudoctor: ignore[GD601
    """))
    assert found == {"2": ["GD601"], "3": ["GD601", "GD602"], "4": ["GD601", "GD602"], "5": ["*"],
                     "7": ["GD999"], "8": ["[GD601"]}


def test_suppressions_are_recorded_in_the_script_facts():
    assert script("import os  # gpudoctor: ignore[GD602]\n")["suppressions"] == {"1": ["GD602"]}


# ---------------------------------------------------------------- bad input -------------------------------------
def test_syntax_error_has_line_and_column():
    result = run("import torch\n\ndef main(:\n    pass\n")
    assert result.script is None
    [problem] = result.problems
    assert (problem.line, problem.column) == (3, 10) and "SyntaxError" in problem.error


def test_python2_file_says_so():
    result = run('import sys\nprint "hello", sys.argv\n')
    [problem] = result.problems
    assert problem.line == 2 and "Python 2" in problem.error


def test_python2_except_comma():
    result = run("try:\n    pass\nexcept ValueError, e:\n    pass\n")
    assert "Python 2" in result.problems[0].error and result.problems[0].line == 3


def test_non_utf8_is_reported_and_still_analysed():
    raw = b"import torch.multiprocessing as mp\nname = '\xe9t\xe9'\nmp.spawn(print, nprocs=2)\n"
    result = analyse("latin.py", raw)
    assert result.script is not None and lines(result.script["process_starts"]) == [3]
    [problem] = result.problems
    assert problem.line == 2 and problem.column == 9 and not problem.fatal and "UTF-8" in problem.error


def test_declared_latin1_is_fine():
    raw = b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n"
    result = analyse("latin.py", raw)
    assert result.problems == [] and result.script is not None


def test_utf16_and_nul_bytes():
    result = analyse("u16.py", "import os\nx = 1\n".encode("utf-16"))
    assert result.problems and "UTF-16" in result.problems[0].error
    result = analyse("bin.py", b"\x7fELF\x00\x00\x01binary")
    assert result.script is None and "NUL" in result.problems[0].error


def test_unknown_encoding_cookie():
    result = analyse("x.py", b"# -*- coding: klingon -*-\nx = 1\n")
    assert result.problems and result.script is not None


@pytest.mark.parametrize("source", [
    "x = " + "(" * 300 + "1" + ")" * 300 + "\n",
    "x = " + "[" * 5000 + "]" * 5000 + "\n",
    "x = " + " + ".join(["a"] * 100_000) + "\n",
    "".join(" " * i + "if x:\n" for i in range(120)) + " " * 120 + "pass\n",
    "x = " + "f(" * 1000 + "1" + ")" * 1000 + "\n",
])
def test_deep_nesting_never_raises(source):
    started = time.monotonic()
    result = run(source)
    assert time.monotonic() - started < 10
    assert result.script is None and result.problems


def test_deep_but_legal_nesting_is_analysed():
    body = "".join("    " * i + "if x:\n" for i in range(90)) + "    " * 90 + "mp.spawn(print, nprocs=2)\n"
    result = run("import torch.multiprocessing as mp\n" + body)
    assert result.script is not None and lines(result.script["process_starts"]) == [92]


def test_long_call_chain_is_bounded():
    chain = "\n".join(f"def f{i}():\n    f{i + 1}()" for i in range(500))
    source = f"import torch.multiprocessing as mp\n{chain}\ndef f500():\n    mp.spawn(print, nprocs=2)\nf0()\n"
    started = time.monotonic()
    result = run(source)
    assert time.monotonic() - started < 10
    assert result.script is not None  # deep chains are cut (truncated), never a RecursionError


def test_many_callers_do_not_blow_up():
    # every function calls every earlier one: exponential if summaries were not shared
    funcs = "\n".join(f"def f{i}():\n" + "".join(f"    f{j}()\n" for j in range(i)) + "    mp.spawn(print)\n"
                      for i in range(60))
    started = time.monotonic()
    result = run(f"import torch.multiprocessing as mp\n{funcs}\nf59()\n")
    assert time.monotonic() - started < 10
    assert len(result.script["process_starts"]) == 60


def _big_script(functions: int) -> bytes:
    body = "\n".join(f"def f{i}(a):\n    return a + {i}" for i in range(functions))
    return ("import torch.multiprocessing as mp\n" + body + "\nf1(2)\nmp.spawn(print, nprocs=2)\n").encode()


def test_a_long_script_takes_linear_time():
    """Four times the lines take about four times the CPU time (a quadratic pass: sixteen), measured on 2k and
    8k lines; at that rate a 100k-line file takes seconds."""
    import gc

    cpu = []
    for functions in (1_000, 4_000):
        source = _big_script(functions)
        runs = []
        gc.disable()  # the collector's full passes grow with every object alive: the reader's own time is measured
        try:
            for _ in range(3):  # the fastest of three: another process's burst lands on one of them
                started = time.process_time()
                result = analyse("big.py", source)
                runs.append(time.process_time() - started)
        finally:
            gc.enable()
        cpu.append(min(runs))
        assert lines(result.script["process_starts"]) == [2 * functions + 3]
    assert cpu[1] < 8 * cpu[0] + 0.05, cpu
    assert cpu[1] < 5, cpu


def test_empty_and_comment_only_files():
    assert run("").script["process_starts"] == []
    assert run("# nothing\n").script["process_starts"] == []


def test_newer_syntax_does_not_crash():
    result = run("""
        match command:
            case "train":
                import torch.multiprocessing as mp
                mp.spawn(print, nprocs=2)
            case _:
                pass
        def f[T](x: T) -> T:
            return x
    """)
    if sys.version_info >= (3, 12):  # PEP 695's type parameters: the whole script is read
        assert result.script is not None and lines(result.script["process_starts"]) == [4], result.problems
    else:  # one fatal problem says which grammar refused which line
        assert result.script is None
        (problem,) = result.problems
        assert problem.fatal and problem.line == 7 and "SyntaxError" in problem.error
        assert f"Python {sys.version_info[0]}.{sys.version_info[1]} grammar" in problem.error


# ---------------------------------------------------------------- property tests: never raise -----------------
FRAGMENTS = [
    "import torch.multiprocessing as mp", "from torch.utils.data import DataLoader", "import os, torch",
    "import nemo_run as run", "from multiprocessing import Pool, Process", "def main():", "def f(x=1):",
    "class C(Process):", "class D:", "    def run(self):", "if __name__ == '__main__':", "if x:", "else:",
    "for b in loader:", "while x:", "with Pool(2) as p:", "try:", "except Exception:", "    pass", "pass",
    "    main()", "main()", "f()", "C().start()", "D().run()", "    mp.spawn(f, nprocs=2)", "mp.spawn(f)",
    "loader = DataLoader([1], num_workers=2)", "    loader = DataLoader([1], num_workers=N)", "N = 4",
    "os.environ['CUDA_VISIBLE_DEVICES'] = '0'", "torch.cuda.init()", "    x = model.to('cuda')",
    "recipe.trainer.devices = 1", "run.run(recipe)", "    return DataLoader([1], num_workers=1)",
    "x = f()", "    self.l = DataLoader([], num_workers=3)", "    for b in self.l:", "        pass",
    "ctx = mp.get_context('spawn')", "ctx.Pool()", "    f(f(f()))", "lambda: mp.spawn(f)",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_random_programs_never_raise(fragments):
    source = "\n".join(fragments)
    result = analyse("fuzz.py", source.encode())
    try:
        ast.parse(source)
    except SyntaxError as refused:  # Python refuses it: no script, a fatal problem says why
        why = type(refused).__name__  # SyntaxError, IndentationError
        assert result.script is None and any(p.fatal and why in p.error for p in result.problems), result.problems
    else:  # Python reads it: so does the analysis, without a fatal problem
        assert result.script is not None and not any(p.fatal for p in result.problems), result.problems


def _no_script_exactly_when_a_fatal_problem_says_why(result) -> None:
    fatal = [p for p in result.problems if p.fatal]
    assert (result.script is None) == bool(fatal), result.problems
    assert all(isinstance(p.error, str) and p.error for p in result.problems)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=3000))
def test_random_bytes_never_raise(raw):
    _no_script_exactly_when_a_fatal_problem_says_why(analyse("fuzz.py", raw))
