"""GD312: ZeRO optimizer offload on a run that trains PEFT adapters. The script reader finds the adapters (peft's
own API, unsloth's wrapper); the rule judges them with the DeepSpeed config of the same job."""

import textwrap

import pytest
from conftest import FIXTURES

from gpudoctor.catalog import find_rule
from gpudoctor.engine import evaluate
from gpudoctor.readers.python.script import analyse
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot

LAUNCH = FIXTURES / "launch"


def adapters(source: str) -> list:
    return [entry["what"].split("(")[0] for entry in
            analyse("train.py", textwrap.dedent(source).encode()).requests["adapters"]]


@pytest.mark.parametrize("source,found", [
    ("from peft import LoraConfig, get_peft_model\nm = get_peft_model(m, LoraConfig(r=8))\n",
     ["get_peft_model", "LoraConfig"]),
    ("import peft\ncfg = peft.IA3Config(target_modules=['k'])\n", ["peft.IA3Config"]),
    ("from peft.tuners.lora import LoraConfig as LC\nLC(r=4)\n", ["LC"]),
    ("from unsloth import FastLanguageModel\nm = FastLanguageModel.get_peft_model(m, r=16)\n",
     ["FastLanguageModel.get_peft_model"]),
    ("from peft import PeftModel\nm = PeftModel.from_pretrained(m, 'out', is_trainable=True)\n",
     ["PeftModel.from_pretrained"]),
])
def test_a_script_that_trains_adapters(source, found):
    assert sorted(adapters(source)) == sorted(found)


@pytest.mark.parametrize("source", [
    "from peft import PeftModel\nm = PeftModel.from_pretrained(m, 'out')\nm = m.merge_and_unload()\n",  # inference
    "from peft import PeftConfig\nc = PeftConfig.from_pretrained('out')\n",
    "class LoraConfig:\n    pass\nLoraConfig()\n",  # not peft's
    "from peft import LoraConfig\ndef unused():\n    return LoraConfig(r=8)\n",  # never called
    "from peft import LoraConfig\ncfg = LoraConfig(r=8)  # gpudoctor: ignore[GD312]\n",
])
def test_no_adapter_is_trained(source):
    assert adapters(source) == []


def test_trls_get_peft_config_is_an_adapter_only_with_its_option():
    source = "from trl import get_peft_config\nc = get_peft_config(model_args)\n"  # None unless --use_peft
    [entry] = analyse("train.py", source.encode()).requests["adapters"]
    assert entry["option"] == "--use_peft"


def lint(*names):
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    for name in names:
        read_file(LAUNCH / name, snapshot)
    return evaluate(snapshot, [find_rule("GD312")])


def test_the_lora_job_with_a_cpu_offload_config_is_told():
    report = lint("lora_offload.sh", "finetune_lora.py", "ds_z2_offload_lora.json")
    [finding] = report.findings
    assert str(finding.severity) == "info" and finding.location.line == 7
    assert finding.evidence["offload_optimizer_device"] == "cpu"
    assert "get_peft_model(…) at" in finding.message or "LoraConfig(…) at" in finding.message


def test_the_same_job_without_offload_passes():
    report = lint("lora_zero2.sh", "finetune_lora.py", "ds_z2_lora.json")
    assert not report.findings and report.passed == ("GD312",)


def test_the_lora_script_alone_is_unknown_its_trainer_takes_deepspeed_from_the_command_line():
    report = lint("finetune_lora.py")
    assert not report.findings and not report.passed and [u.rule for u in report.unknown] == ["GD312"]


def test_a_job_that_shows_the_whole_command_line_without_deepspeed_passes(tmp_path):
    (tmp_path / "run.sh").write_text("torchrun --nproc_per_node 4 finetune_lora.py --output_dir out --bf16\n")
    (tmp_path / "finetune_lora.py").write_text((LAUNCH / "finetune_lora.py").read_text())
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    for name in ("run.sh", "finetune_lora.py"):
        read_file(tmp_path / name, snapshot)
    report = evaluate(snapshot, [find_rule("GD312")])
    assert report.passed == ("GD312",)


def test_a_script_without_adapters_has_nothing_to_judge():
    report = lint("train_hf.py", "ds_z2_offload_lora.json")
    assert [(n.rule, n.reason) for n in report.not_applicable] == [("GD312", "no PEFT adapter")]


TRL_SFT = """
from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser, get_peft_config


def main():
    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args,
                         peft_config=get_peft_config(model_args))
    trainer.train()


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("options,fires", [("--use_peft --lora_r 16", True), ("--use_peft=true", True),
                                           ("--use_peft false", False), ("--lora_r 16", False)])
def test_trl_makes_an_adapter_only_with_use_peft_on_the_command_line(tmp_path, options, fires):
    """TRL's get_peft_config(model_args) returns None unless ModelConfig.use_peft: the job's command line decides."""
    (tmp_path / "sft.py").write_text(TRL_SFT)
    (tmp_path / "run.sh").write_text(f"torchrun --nproc_per_node 4 sft.py --model_name_or_path m {options} "
                                     "--deepspeed ds_offload.json --output_dir out\n")
    (tmp_path / "ds_offload.json").write_text((LAUNCH / "ds_z2_offload_lora.json").read_text())
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    for name in ("run.sh", "sft.py", "ds_offload.json"):
        read_file(tmp_path / name, snapshot)
    report = evaluate(snapshot, [find_rule("GD312")])
    assert [f.rule for f in report.findings] == (["GD312"] if fires else [])
    assert fires or report.passed == ("GD312",)
