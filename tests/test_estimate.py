"""The memory estimate (gpudoctor.estimate), GD501/GD504 and `gpudoctor estimate`.

Model configs in fixtures/models are the public hyperparameters of Qwen/Qwen2.5-0.5B and meta-llama/Llama-2-7b-hf
(their config.json on huggingface.co, copied by hand; nothing is downloaded). Known parameter counts: Qwen2.5-0.5B
494,032,768 (the model card's 0.49B), Llama-2-7b 6,738,415,616.
"""

import json

import pytest
from conftest import FIXTURES

from gpudoctor.estimate import (
    OVERHEAD_BYTES,
    ModelError,
    ModelSpec,
    Training,
    activation_bytes,
    count_params,
    estimate,
    load_model,
    parse_size,
    resolve,
)
from gpudoctor.units import GiB

QWEN = FIXTURES / "models" / "qwen2.5-0.5b.config.json"
LLAMA7B = FIXTURES / "models" / "llama-2-7b.config.json"
RTX6000ADA = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"  # seed 001/004's workstation, 48 GB
T4 = FIXTURES / "machines" / "t4-cu121.json"  # 64 GiB RAM host
ZERO2_OFFLOAD = FIXTURES / "ds_configs" / "zero2_offload.json"  # seed 004
ZERO3_OFFLOAD = FIXTURES / "ds_configs" / "zero3_offload.json"


# --- inputs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,params", [("0.5B", 500_000_000), ("7e9", 7_000_000_000), ("1.3b", 1_300_000_000),
                                         ("350M", 350_000_000), ("494032768", 494_032_768), (" 70B ", 70 * 10**9)])
def test_sizes(text, params):
    assert parse_size(text) == params


@pytest.mark.parametrize("text", ["banana", "", "0", "7 GB", "-1B", "1e20"])
def test_not_sizes(text):
    assert parse_size(text) is None


def test_hf_configs_give_the_published_parameter_counts():
    qwen = load_model(str(QWEN))
    assert qwen.params == 494_032_768 and qwen.kind == "config"
    assert (qwen.layers, qwen.hidden, qwen.heads, qwen.kv_heads, qwen.vocab) == (24, 896, 14, 2, 151936)
    assert qwen.largest_layer_params == 151936 * 896  # the (tied) embedding
    assert load_model(str(LLAMA7B)).params == 6_738_415_616
    assert load_model(str(QWEN.parent / QWEN.name)).params == load_model(str(QWEN)).params


def test_config_variants():
    base = json.loads(QWEN.read_text())
    untied, _ = count_params({**base, "tie_word_embeddings": False})
    assert untied == 494_032_768 + 151936 * 896
    nested, _ = count_params({"model_type": "llava", "text_config": base})
    assert nested == 494_032_768
    moe, shape = count_params({**base, "num_local_experts": 8})  # every expert's MLP is held, plus a router
    assert moe == 494_032_768 + 24 * (7 * 3 * 896 * 4864 + 896 * 8) and shape["experts"] == 8
    with pytest.raises(ModelError, match="hidden_size"):
        count_params({"vocab_size": 10})


def test_bad_model_inputs(tmp_path):
    with pytest.raises(ModelError, match="neither a size"):
        load_model("banana")
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ModelError, match="not JSON"):
        load_model(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(ModelError, match="not a config object"):
        load_model(str(bad))
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ModelError):
        load_model(str(bad))
    bad.write_text(QWEN.read_text())
    assert load_model(str(tmp_path)).params == 494_032_768  # a model directory


# --- the formulas, by hand -----------------------------------------------------------------------------

def test_model_states_by_hand():
    psi = 10**9
    model = ModelSpec(source="1B", params=psi)
    plain = estimate(model, Training(precision="bf16"))
    assert (plain.weights, plain.gradients, plain.optimizer) == (2 * psi, 2 * psi, 12 * psi)  # ZeRO paper: 16 B
    fp32 = estimate(model, Training(precision="fp32"))
    assert (fp32.weights, fp32.gradients, fp32.optimizer) == (4 * psi, 4 * psi, 8 * psi)
    sgd = estimate(model, Training(precision="fp32", optimizer="sgd"))
    assert sgd.optimizer == 4 * psi
    assert plain.activations == 0 and not plain.activations_known and plain.breakdown()["activations"] is None
    assert plain.total == 16 * psi + OVERHEAD_BYTES
    # ZeRO paper's example: 7.5B params: 120 GB of model states without ZeRO
    paper = estimate(ModelSpec(source="7.5B", params=7_500_000_000), Training())
    assert paper.weights + paper.gradients + paper.optimizer == 120 * 10**9
    # DeepSpeed ZeRO on 8 ranks: optimizer (and its fp32 gradient partition) over 8 from stage 1, gradients stage 2
    ds = dict(deepspeed=True, world_size=8, gpus_per_node=8)
    z1 = estimate(model, Training(zero_stage=1, **ds))
    assert (z1.weights, z1.gradients, z1.optimizer) == (2 * psi, 2 * psi + 4 * psi // 8, 12 * psi // 8)
    z2 = estimate(model, Training(zero_stage=2, **ds))
    assert (z2.weights, z2.gradients, z2.optimizer) == (2 * psi, 6 * psi // 8, 12 * psi // 8)
    z3 = estimate(ModelSpec(source="1B", params=psi, largest_layer_params=10**8), Training(zero_stage=3, **ds))
    assert (z3.weights, z3.gradients, z3.optimizer) == (2 * psi // 8 + 4 * 10**8, 4 * psi // 8, 12 * psi // 8)


def test_activations_korthikanti():
    """A layout other than a gated decoder (GPT-2's 4h GeLU MLP) follows Korthikanti et al."""
    gpt2 = ModelSpec(**{**load_model("openai-community/gpt2").to_json(), "source": "gpt2"})
    s, b, h, a, layers, v = 2048, 1, 768, 12, 12, 50257
    logits = 4 * s * b * v
    assert activation_bytes(gpt2, Training()) == 34 * s * b * h * layers + logits  # flash: no a·s² scores
    eager = Training(attention="eager")
    assert activation_bytes(gpt2, eager) == (s * b * h * (34 + 5 * a * s / h)) * layers + logits
    checkpointed = Training(checkpointing=True)
    assert activation_bytes(gpt2, checkpointed) == 2 * s * b * h * layers + 34 * s * b * h + logits
    assert activation_bytes(gpt2, Training(micro_batch=4)) == 4 * activation_bytes(gpt2, Training())
    assert activation_bytes(ModelSpec(source="7B", params=7 * 10**9), Training()) is None


def test_activations_of_a_gated_decoder():
    """Qwen2.5-0.5B (h 896, q 896, kv 128, i 4864): (2 norms × 6h + 10q + 8kv + 8i)·sb per layer, as transformers'
    Qwen2 layer keeps them (benchmarks/estimate_activations.py measures the same layout)."""
    qwen = load_model(str(QWEN))
    s, b, layers, v = 2048, 1, 24, 151936
    per_layer = s * b * (12 * 896 + 10 * 896 + 8 * 128 + 8 * 4864)
    assert activation_bytes(qwen, Training()) == per_layer * layers + 4 * s * b * v
    assert activation_bytes(qwen, Training(checkpointing=True)) == 2 * s * b * 896 * layers + per_layer + 4 * s * b * v
    eager = activation_bytes(qwen, Training(attention="eager")) - activation_bytes(qwen, Training())
    assert eager == 5 * 14 * s * s * b * layers


# --- against DeepSpeed's own estimators -----------------------------------------------------------------

PARAM_COUNTS = [494_032_768, 6_738_415_616]
GPU_COUNTS = [1, 2, 4, 8]


def _ds(stage, gpus, offload_optimizer="none", offload_param="none"):
    return Training(deepspeed=True, zero_stage=stage, world_size=gpus, gpus_per_node=gpus,
                    offload_optimizer=offload_optimizer, offload_param=offload_param)


def _states(est):
    return est.weights + est.gradients + est.optimizer


@pytest.mark.parametrize("params", PARAM_COUNTS)
@pytest.mark.parametrize("gpus", GPU_COUNTS)
@pytest.mark.parametrize("offload", [False, True])
def test_zero2_matches_deepspeed(params, gpus, offload):
    stage_1_and_2 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2")
    cpu, gpu = stage_1_and_2.estimate_zero2_model_states_mem_needs(params, num_gpus_per_node=gpus, num_nodes=1,
                                                                   cpu_offload=offload)
    est = estimate(ModelSpec(source="x", params=params), _ds(2, gpus, "cpu" if offload else "none"))
    assert abs(_states(est) - gpu) <= 8
    assert abs(est.host_bytes - cpu) <= 8


@pytest.mark.parametrize("params", PARAM_COUNTS)
@pytest.mark.parametrize("gpus", GPU_COUNTS)
@pytest.mark.parametrize("offload_optimizer,offload_param", [("none", "none"), ("cpu", "none"), ("cpu", "cpu")])
def test_zero3_matches_deepspeed(params, gpus, offload_optimizer, offload_param):
    stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")
    largest = 151936 * 896 if params < 10**9 else 32000 * 4096
    cpu, gpu, _ = stage3.estimate_zero3_model_states_mem_needs(
        params, largest, num_gpus_per_node=gpus, num_nodes=1, cpu_offload=offload_optimizer == "cpu",
        cpu_offload_params=offload_param == "cpu", zero_init=True)
    est = estimate(ModelSpec(source="x", params=params, largest_layer_params=largest),
                   _ds(3, gpus, offload_optimizer, offload_param))
    assert abs(_states(est) - gpu) <= 8
    assert abs(est.host_bytes - cpu) <= 8


# --- where the settings come from -----------------------------------------------------------------------

def test_settings_from_a_deepspeed_config_flags_win():
    config = json.loads(ZERO3_OFFLOAD.read_text())
    training, sources = resolve({}, config, "zero3_offload.json", 4, None)
    assert (training.zero_stage, training.offload_optimizer, training.offload_param) == (3, "cpu", "cpu")
    assert (training.micro_batch, training.precision, training.world_size) == (2, "bf16", 4)
    assert sources["micro_batch"].startswith("DeepSpeed config") and sources["seq_len"] == "default"
    training, sources = resolve({"micro_batch": 8, "zero_stage": 2}, config, "z.json", 4, "16")
    assert training.micro_batch == 8 and training.zero_stage == 2 and sources["micro_batch"] == "flag"
    assert training.world_size == 16 and training.gpus_per_node == 4 and sources["world_size"] == "WORLD_SIZE"
    # "auto" values fall back to the defaults; no precision section at all means fp32 in DeepSpeed
    auto, _ = resolve({}, json.loads(ZERO2_OFFLOAD.read_text()), "z.json", 1, None)
    assert auto.precision == "bf16" and auto.micro_batch == 1 and auto.offload_optimizer == "cpu"
    bare, _ = resolve({}, {"zero_optimization": {"stage": 1}}, "z.json", 1, None)
    assert bare.precision == "fp32" and bare.deepspeed


# --- the rules, through the CLI -------------------------------------------------------------------------

def test_seed_001_qwen_fits_the_rtx6000ada(run_cli):
    code, out, err = run_cli("check", "--snapshot", RTX6000ADA, "--model", QWEN, "--select", "GD501,GD504",
                             "--format", "json")
    report = json.loads(out)
    assert err == "" and report["findings"] == [] and report["summary"]["passed"] == 2


def test_7b_fp32_adam_does_not_fit_24gb(run_cli):
    code, out, _ = run_cli("estimate", "--model", LLAMA7B, "--precision", "fp32", "--gpu", "RTX 4090",
                           "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["gpus"][0]["fits"] is False and data["gpus"][0]["memory_bytes"] == 24564 * 2**20
    assert data["breakdown"]["optimizer"] == 8 * 6_738_415_616
    snapshot = {"schema": "gpudoctor.snapshot/1", "facts": {"nvml": {"status": "ok", "gpus": [
        {"index": 0, "name": "NVIDIA GeForce RTX 4090"}]}, "env": {}}}
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snap.json"
        path.write_text(json.dumps(snapshot))
        code, out, _ = run_cli("check", "--snapshot", path, "--model", LLAMA7B, "--precision", "fp32",
                               "--select", "GD501", "--format", "plain")
    assert code == 1
    assert "GD501 gpu-memory-insufficient" in out and "weights 25.1 GiB" in out and "activations" in out


def test_headroom_warning(run_cli, tmp_path):
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"schema": "gpudoctor.snapshot/1", "facts": {"nvml": {"status": "ok", "gpus": [
        {"index": 0, "name": "NVIDIA GeForce RTX 4090", "memory_total_bytes": 24 * GiB}]}, "env": {}}}))
    code, out, _ = run_cli("check", "--snapshot", path, "--model", "1.44B", "--select", "GD501", "--format", "json")
    finding = json.loads(out)["findings"][0]
    assert code == 0 and finding["severity"] == "warning" and "free" in finding["message"]


def test_gd504_zero3_offload_on_a_small_host(run_cli):
    code, out, _ = run_cli("check", "--snapshot", T4, "--model", "7B", "--ds-config", ZERO3_OFFLOAD,
                           "--select", "GD504", "--format", "json")
    findings = json.loads(out)["findings"]
    assert code == 1 and [f["rule"] for f in findings] == ["GD504"]
    evidence = findings[0]["evidence"]
    assert evidence["host_bytes"] == int(18 * 7e9 / 1 * 1.5)  # DeepSpeed: Ψ·18/num_nodes·1.5, one node
    assert "ZeRO-3 CPU offload" in findings[0]["message"]
    # the same with a 1B model fits in 64 GiB
    code, out, _ = run_cli("check", "--snapshot", T4, "--model", "1B", "--ds-config", ZERO3_OFFLOAD,
                           "--select", "GD504", "--format", "json")
    assert code == 0 and json.loads(out)["findings"] == []


def test_without_model_the_memory_rules_are_not_applicable(run_cli):
    """No --model: nothing to estimate. The memory rules say so (not applicable), never passed, never unknown."""
    code, out, _ = run_cli("check", "--snapshot", T4, "--ds-config", ZERO3_OFFLOAD, "--select", "GD501,GD504",
                           "--format", "json")
    report = json.loads(out)
    assert report["findings"] == [] and report["summary"]["passed"] == 0 and report["summary"]["unknown"] == 0
    assert report["not_applicable"] == [{"rule": "GD501", "reason": "no model"},
                                        {"rule": "GD504", "reason": "no model"}]


# --- bad input: exit 2, one line --------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["estimate", "check"])
def test_banana(run_cli, command):
    code, out, err = run_cli(command, "--model", "banana", *(["--snapshot", T4] if command == "check" else []))
    assert code == 2 and out == "" and err.count("\n") == 1 and "banana" in err


def test_config_that_is_not_json(run_cli, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("model_type: llama\n")
    code, _, err = run_cli("estimate", "--model", bad, "--gpu", "24GB")
    assert code == 2 and err.count("\n") == 1 and "not JSON" in err and "Traceback" not in err


@pytest.mark.parametrize("argv,message", [
    (["estimate", "--model", "7B", "--gpu", "Voodoo 3dfx"], "not a GPU gpudoctor knows"),
    (["estimate", "--model", "7B", "--micro-batch", "0"], "must be positive"),
    (["estimate", "--model", "7B", "--ds-config", "/nonexistent.json"], "no such file"),
    (["check", "--micro-batch", "2"], "--micro-batch needs --model"),
    (["estimate"], "--model"),
])
def test_usage_errors(run_cli, argv, message):
    code, _, err = run_cli(*argv)
    assert code == 2 and message in err and err.count("\n") == 1


# --- gpudoctor estimate --------------------------------------------------------------------------------

def test_estimate_json_schema(run_cli):
    code, out, _ = run_cli("estimate", "--model", QWEN, "--gpu", "RTX 6000 Ada", "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert set(data) == {"schema", "params", "total_bytes_per_gpu", "breakdown", "leaves_out", "host_bytes", "gpus",
                         "remedies", "assumptions"}
    assert data["schema"] == "gpudoctor.estimate/1" and data["params"] == 494_032_768
    assert set(data["breakdown"]) == {"weights", "gradients", "optimizer", "activations", "overhead"}
    assert data["total_bytes_per_gpu"] == sum(data["breakdown"].values())
    reported = 49140 * 2**20  # what nvidia-smi shows for the card (rules/gpus.toml memory_reported_mib)
    assert data["gpus"] == [{"name": "NVIDIA RTX 6000 Ada Generation", "memory_bytes": reported, "fits": True,
                             "headroom_bytes": reported - data["total_bytes_per_gpu"], "leaves_out": []}]
    for key in ("precision", "optimizer", "zero_stage", "offload", "micro_batch", "seq_len", "world_size"):
        assert key in data["assumptions"]
    assert isinstance(data["host_bytes"], int)


def test_estimate_with_a_deepspeed_config_and_plain_output(run_cli):
    code, out, _ = run_cli("estimate", "--model", LLAMA7B, "--ds-config", ZERO3_OFFLOAD, "--world-size", "8",
                           "--gpu", "H100 80GB", "--format", "plain")
    assert code == 0 and "\x1b[" not in out
    out = " ".join(out.split())  # wrapped to the terminal's width
    assert "6,738,415,616 parameters" in out and "zero_stage=3 (DeepSpeed config" in out
    assert "micro_batch=2 (DeepSpeed config" in out and "world_size=8 (flag)" in out
    assert "NVIDIA H100 SXM5 (79.6 GiB): fits" in out


def test_estimate_without_gpus(run_cli, monkeypatch):
    import gpudoctor.fit as cli

    monkeypatch.setattr(cli, "local_gpus", lambda: [])
    code, out, _ = run_cli("estimate", "--model", "0.5B", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["gpus"] == [] and data["assumptions"]["gpus_from"] == "none: no GPU found"
    assert data["breakdown"]["activations"] is None


def test_a_bare_small_number_is_no_model(run_cli):
    code, _, err = run_cli("estimate", "--model", "7", "--gpu", "4090")
    assert code == 2 and "give a unit (7B, 350M)" in err


def test_a_verdict_names_what_it_leaves_out_and_host_ram_its_node(run_cli):
    _, out, _ = run_cli("estimate", "--model", "7B", "--gpu", "A100 80GB", "--world-size", "16")
    text = " ".join(out.split())
    assert "does NOT fit without the activations (not estimated)" in text
    assert "host RAM assumes all 16 ranks on one node" in text
