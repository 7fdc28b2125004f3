"""`estimate` answers the next question: what would make it fit (gpudoctor.remedies), models named by their Hugging
Face Hub id (the local cache, then rules/models.toml), a size with LoRA, the memory a GPU reports, and a verdict that
says what it leaves out."""

import json
import shutil

import pytest
from conftest import FIXTURES

from gpudoctor.data import load_toml, rules_dir
from gpudoctor.estimate import Training, count_params, estimate, load_model
from gpudoctor.remedies import CHANGES, remedies
from gpudoctor.units import GiB

QWEN = FIXTURES / "models" / "qwen2.5-0.5b.config.json"
MODELS = load_toml(rules_dir() / "models.toml")["model"]
CONFIG_KEYS = ("id", "also", "params", "source")


# --- the table of published configs --------------------------------------------------------------------

@pytest.mark.parametrize("entry", MODELS, ids=[m["id"] for m in MODELS])
def test_each_table_entry_gives_its_published_parameter_count(entry):
    counted, _ = count_params({k: v for k, v in entry.items() if k not in CONFIG_KEYS})
    assert counted == entry["params"]


@pytest.mark.parametrize("hub_id", ["Qwen/Qwen2.5-0.5B", "google/gemma-2-2b", "Qwen/Qwen3-8B", "openai-community/gpt2",
                                    "mistralai/Mixtral-8x7B-v0.1", "microsoft/Phi-3-mini-4k-instruct"])
def test_transformers_builds_the_same_count_from_the_table(hub_id):
    """The real library: transformers builds each architecture from the table's fields (on the meta device, no
    memory) and counts the same parameters gpudoctor does."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    entry = next(m for m in MODELS if m["id"] == hub_id)
    fields = {k: v for k, v in entry.items() if k not in CONFIG_KEYS + ("model_type",)}
    config = transformers.AutoConfig.for_model(entry["model_type"], **fields)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == load_model(hub_id).params == entry["params"]


def test_a_hub_id_resolves_from_the_table_offline(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache
    spec = load_model("Qwen/Qwen2.5-7B-Instruct")
    assert spec.params == 7_615_616_512 and "gpudoctor's table" in spec.shape_from
    assert load_model("qwen/qwen2.5-7b").params == spec.params  # case and the org are as users type them
    code, out, _ = run_cli("estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100 SXM", "--format", "json")
    assert code == 0 and json.loads(out)["params"] == 8_030_261_248


def _cache(root, hub_id, config, revision="a" * 40):
    repo = root / ("models--" + hub_id.replace("/", "--"))
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    (repo / "snapshots" / revision).mkdir(parents=True)
    (repo / "snapshots" / revision / "config.json").write_text(json.dumps(config))


def test_the_local_cache_wins_over_the_table(monkeypatch, tmp_path):
    """huggingface_hub's layout: HF_HUB_CACHE, else HF_HOME/hub; the `main` ref names the snapshot read."""
    config = json.loads(QWEN.read_text())
    _cache(tmp_path / "home" / "hub", "Qwen/Qwen2.5-0.5B", {**config, "num_hidden_layers": 12})
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    spec = load_model("Qwen/Qwen2.5-0.5B")
    assert spec.layers == 12 and "local Hugging Face cache" in spec.shape_from
    _cache(tmp_path / "hubcache", "Qwen/Qwen2.5-0.5B", config)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hubcache"))
    assert load_model("Qwen/Qwen2.5-0.5B").params == 494_032_768


def test_an_unknown_hub_id_is_one_line_and_nothing_is_downloaded(run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    code, out, err = run_cli("estimate", "--model", "someone/their-model-13b", "--gpu", "24GB")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "in the local Hugging Face cache or gpudoctor's table" in err and "huggingface-cli download" in err


def test_a_size_with_lora_assumes_a_llama_like_shape_and_says_so(run_cli):
    code, out, _ = run_cli("estimate", "--model", "7B", "--lora-rank", "16", "--gpu", "24GB", "--format", "plain")
    text = " ".join(out.split())
    assert code == 0 and "trainable parameters" in text
    assert "assumed as the Llama-like decoder nearest 7B" in text


# --- the GPU's memory and the verdict ------------------------------------------------------------------

def test_a_named_gpu_has_the_memory_the_device_reports(run_cli):
    """nvidia-smi shows 81559 MiB on an H100 80GB HBM3 (79.6 GiB), not 80 GiB."""
    _, out, _ = run_cli("estimate", "--model", "1B", "--gpu", "H100 SXM", "--format", "json")
    assert json.loads(out)["gpus"][0]["memory_bytes"] == 81559 * 2**20
    _, out, _ = run_cli("estimate", "--model", "1B", "--gpu", "H100 SXM", "--format", "plain")
    assert "79.6 GiB as the device reports it (80 GB marketed)" in " ".join(out.split())
    _, out, _ = run_cli("estimate", "--model", "1B", "--gpu", "V100 32GB", "--format", "plain")
    assert "32 GB as marketed (the device reports a little less" in " ".join(out.split())


def test_fits_is_null_where_the_activations_were_not_estimated(run_cli):
    _, out, _ = run_cli("estimate", "--model", "1B", "--gpu", "H100 SXM", "--format", "json")
    document = json.loads(out)
    assert document["leaves_out"] == ["activations"]
    assert document["gpus"][0]["fits"] is None and document["gpus"][0]["headroom_bytes"] > 0
    _, out, _ = run_cli("estimate", "--model", QWEN, "--gpu", "H100 SXM", "--format", "json")
    assert json.loads(out)["gpus"][0]["fits"] is True and json.loads(out)["leaves_out"] == []


@pytest.mark.parametrize("argv,said,not_said", [
    ([], "(6h per norm + 10q + 8kv + 8i)·sb per layer (flash/SDPA attention keeps no a·s² scores)", "5as²b"),
    (["--attention", "eager"], "+ 5as²b per layer (eager attention keeps the a·s² scores)", "keeps no"),
    (["--grad-checkpointing"], "2sbh per layer (checkpointed)", "5as²b"),
])
def test_the_what_column_describes_the_setup_estimated(run_cli, argv, said, not_said):
    _, out, _ = run_cli("estimate", "--model", QWEN, "--gpu", "H100 SXM", "--format", "plain", *argv)
    text = " ".join(out.split())
    assert said in text and not_said not in text


# --- what would make it fit ----------------------------------------------------------------------------

def test_a_run_that_fits_needs_no_remedy(run_cli):
    _, out, _ = run_cli("estimate", "--model", QWEN, "--gpu", "H100 SXM", "--format", "json")
    plan = json.loads(out)["remedies"]
    assert plan["needed"] is False and plan["single"] == []


def test_each_remedy_is_the_estimate_with_that_change():
    """Savings and verdicts are the estimate's own figures after the change, largest saving first."""
    spec = load_model(str(QWEN))
    setup = Training(precision="fp32", micro_batch=8, seq_len=4096, attention="eager", world_size=4)
    plan = remedies(spec, setup, 24 * GiB)
    before = estimate(spec, setup).total
    savings = [row["saving_bytes"] for row in plan["single"]]
    assert savings == sorted(savings, reverse=True) and all(s > 0 for s in savings)
    by_key = {row["keys"][0]: row for row in plan["single"]}
    checkpointed = estimate(spec, Training(precision="fp32", micro_batch=8, seq_len=4096, attention="eager",
                                           world_size=4, checkpointing=True))
    assert by_key["checkpointing"]["total_bytes"] == checkpointed.total
    assert by_key["checkpointing"]["saving_bytes"] == before - checkpointed.total
    assert {"flash_attention", "bf16", "micro_batch", "zero1", "zero2", "zero3"} <= set(by_key)


def test_almost_fits_lists_remedies_for_the_headroom(run_cli):
    """A run that fits with under 10 % free: the remedies are listed; with 20 % free, none."""
    spec = load_model(str(QWEN))
    total = estimate(spec, Training(micro_batch=4)).total
    plan = remedies(spec, Training(micro_batch=4), int(total * 1.05))
    assert plan["before"]["fits"] and plan["before"]["tight"] and plan["needed"] and plan["single"]
    assert remedies(spec, Training(micro_batch=4), int(total * 1.2))["needed"] is False


def test_a_combination_where_no_single_change_fits():
    spec = load_model(str(QWEN))
    setup = Training(micro_batch=8, seq_len=8192, world_size=8)
    plan = remedies(spec, setup, 10 * GiB)
    assert not any(row["fits"] for row in plan["single"])
    together = plan["combination"]
    assert together and len(together["keys"]) >= 2 and together["fits"] is True
    assert together["total_bytes"] <= 10 * GiB and not plan["nothing_fits"]


def test_nothing_short_of_more_or_larger_gpus(run_cli):
    """Llama-2-70B at 32k tokens on one 24 GB card: the activations alone exceed it."""
    code, out, _ = run_cli("estimate", "--model", "meta-llama/Llama-2-70b-hf", "--gpu", "24GB", "--seq-len", "32768",
                           "--micro-batch", "4", "--format", "json")
    plan = json.loads(out)["remedies"]
    assert code == 0 and plan["nothing_fits"] and plan["combination"] is None
    assert plan["larger_gpu_bytes"] == json.loads(out)["total_bytes_per_gpu"]
    _, out, _ = run_cli("estimate", "--model", "meta-llama/Llama-2-70b-hf", "--gpu", "24GB", "--seq-len", "32768",
                        "--micro-batch", "4", "--format", "plain")
    assert "nothing short of more or larger GPUs makes it fit" in " ".join(out.split())


def test_more_gpus_names_the_ranks_zero3_needs():
    spec = load_model("meta-llama/Llama-3.1-8B")
    plan = remedies(spec, Training(world_size=2), 40 * GiB)
    ranks = plan["more_gpus"]["world_size"]
    assert ranks > 2 and ranks & (ranks - 1) == 0  # the next powers of two are tried
    assert estimate(spec, Training(world_size=ranks, deepspeed=True, zero_stage=3)).total <= 40 * GiB
    assert ranks // 2 == 2 or estimate(spec, Training(world_size=ranks // 2, deepspeed=True,
                                                      zero_stage=3)).total > 40 * GiB


def test_every_remedy_names_the_setting_to_change():
    for change in CHANGES:
        assert any(tool in change.how for tool in ("HF Trainer", "DeepSpeed", "transformers", "PEFT")), change.key


@pytest.mark.parametrize("fmt", ["plain", "rich", "json"])
def test_the_list_is_in_every_format(run_cli, fmt):
    code, out, _ = run_cli("estimate", "--model", "meta-llama/Llama-3.1-8B", "--gpu", "4090", "--format", fmt)
    assert code == 0
    if fmt == "json":
        assert json.loads(out)["remedies"]["single"][0]["how"]
    else:
        text = " ".join(out.split())
        assert "what would make it fit in 24.0 GiB, largest saving first" in text and "--gradient_checkpointing" in text


def test_gd501_shows_the_same_list(run_cli):
    code, out, _ = run_cli("check", "--snapshot", FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json", "--model",
                           "meta-llama/Llama-3.1-8B", "--select", "GD501", "--format", "json")
    finding = json.loads(out)["findings"][0]
    assert code == 1 and finding["rule"] == "GD501"
    assert "What would make it fit, largest saving first" in finding["fix"]["summary"]
    assert finding["evidence"]["remedies"]["single"]


def test_a_hub_snapshot_in_the_cache_is_read_not_executed(monkeypatch, tmp_path):
    """A config.json beside code in the cache: only the JSON is read."""
    repo = tmp_path / "hub" / "models--org--tiny"
    (repo / "snapshots" / ("b" * 40)).mkdir(parents=True)
    shutil.copy(QWEN, repo / "snapshots" / ("b" * 40) / "config.json")
    (repo / "snapshots" / ("b" * 40) / "modeling_evil.py").write_text("raise SystemExit('executed')\n")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert load_model("org/tiny").params == 494_032_768
