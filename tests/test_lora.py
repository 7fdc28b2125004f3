"""LoRA/QLoRA in the memory estimate (gpudoctor.adapters), against PEFT and transformers themselves.

Small models are built on CPU from configs of each architecture (random weights, nothing downloaded); PEFT's own
`get_nb_trainable_parameters` gives the trainable count, and one AdamW step on the PEFT model gives the bytes of the
weights, gradients and optimizer states that the estimate's terms must equal.
"""

import pytest
from conftest import FIXTURES

from gpudoctor.adapters import AdapterError
from gpudoctor.estimate import ModelSpec, Training, count_params, estimate, load_model

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

LLAMA7B = FIXTURES / "models" / "llama-2-7b.config.json"
SMALL = {"vocab_size": 512, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
         "num_attention_heads": 4}
CONFIGS = {
    "llama": {**SMALL, "model_type": "llama", "num_key_value_heads": 2, "tie_word_embeddings": False},
    "qwen2": {**SMALL, "model_type": "qwen2", "num_key_value_heads": 2, "tie_word_embeddings": True},
    "mistral": {**SMALL, "model_type": "mistral", "num_key_value_heads": 1, "tie_word_embeddings": False},
    "gemma": {**SMALL, "model_type": "gemma", "num_key_value_heads": 1, "head_dim": 32},
    "phi3": {**SMALL, "model_type": "phi3", "num_key_value_heads": 4, "tie_word_embeddings": False,
             "pad_token_id": 0},
    "gpt2": {"model_type": "gpt2", "vocab_size": 512, "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128},
}


def _model(config: dict, dtype=None):
    hf_config = transformers.AutoConfig.for_model(**config)
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(hf_config, dtype=dtype)


def _spec(config: dict) -> ModelSpec:
    params, shape = count_params(config)
    return ModelSpec(source="config", params=params, kind="config", **shape)


def _peft_trainable(config: dict, rank: int, targets) -> int:
    model = peft.get_peft_model(_model(config), peft.LoraConfig(r=rank, target_modules=targets))
    return model.get_nb_trainable_parameters()[0]


def _ours(config: dict, rank: int, targets) -> int:
    est = estimate(_spec(config), Training(lora_rank=rank, lora_targets=tuple(targets) if targets else None))
    return est.assumptions["lora"]["trainable"]


@pytest.mark.parametrize("arch,rank,targets", [
    ("llama", 8, None), ("llama", 16, "all-linear"), ("llama", 4, ["q_proj", "k_proj", "v_proj", "o_proj"]),
    ("qwen2", 8, None), ("qwen2", 32, ["gate_proj", "up_proj", "down_proj"]), ("mistral", 8, "all-linear"),
    ("gemma", 8, None), ("phi3", 8, ["qkv_proj"]), ("phi3", 4, "all-linear"),
    ("gpt2", 8, None), ("gpt2", 8, ["c_proj"]), ("gpt2", 2, "all-linear"),
])
def test_trainable_parameters_are_peft_s_own_count(arch, rank, targets):
    config = CONFIGS[arch]
    ours_targets = [targets] if isinstance(targets, str) else targets
    assert _ours(config, rank, ours_targets) == _peft_trainable(config, rank, targets)


@pytest.mark.parametrize("arch", ["llama", "qwen2", "mistral", "gemma", "phi3"])
def test_the_shape_is_the_model_s(arch):
    """The linear layers gpudoctor adapts and quantizes are the model's own (what `get_keys_to_not_convert` spares:
    the output layer)."""
    model = _model(CONFIGS[arch])
    spared = set(transformers.quantizers.base.get_keys_to_not_convert(model))
    linear = sum(m.weight.numel() for name, m in model.named_modules()
                 if isinstance(m, torch.nn.Linear) and name not in spared)
    params, shape = count_params(CONFIGS[arch])
    assert params == sum(p.numel() for p in model.parameters())
    assert linear == shape["layers"] * sum(i * o for _, i, o in shape["linears"])


def test_model_states_equal_a_measured_peft_step():
    """bf16 base + fp32 adapters (PEFT's autocast_adapter_dtype), one AdamW step: the bytes the tensors hold."""
    config = CONFIGS["llama"]
    model = peft.get_peft_model(_model(config, torch.bfloat16), peft.LoraConfig(r=8, target_modules="all-linear"))
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    ids = torch.randint(0, config["vocab_size"], (1, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    measured = {
        "weights": sum(p.numel() * p.element_size() for p in model.parameters()),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in trainable),
        "optimizer": sum(t.numel() * t.element_size() for state in optimizer.state.values()
                         for k, t in state.items() if k != "step"),
    }
    terms = estimate(_spec(config), Training(precision="bf16", lora_rank=8, lora_targets=("all-linear",))).breakdown()
    assert {k: terms[k] for k in measured} == measured


def test_llama_7b_qlora_is_the_qlora_recipe_and_fits_24gb(run_cli):
    """r=64 on every linear layer of Llama-2-7B: PEFT prints 159,907,840 trainable parameters for it; in 4 bits
    the job fits a 24 GB card where full fine-tuning needs over 100 GiB."""
    code, out, _ = run_cli("estimate", "--model", LLAMA7B, "--gpu", "24GB", "--format", "plain", "--lora-rank", "64",
                           "--lora-targets", "all-linear", "--quantize", "4bit", "--grad-checkpointing")
    assert code == 0 and "159,907,840 trainable" in out and "24GB (24.0 GiB): fits" in out
    code, out, _ = run_cli("estimate", "--model", LLAMA7B, "--gpu", "24GB", "--format", "plain")
    assert "does NOT fit" in out


def test_quantized_weights_are_smaller_than_16_bit():
    spec = load_model(str(LLAMA7B))
    lora16 = estimate(spec, Training(lora_rank=8))
    qlora = estimate(spec, Training(lora_rank=8, quantize="4bit"))
    q8 = estimate(spec, Training(lora_rank=8, quantize="8bit"))
    assert qlora.weights < q8.weights < lora16.weights
    linear = spec.layers * sum(i * o for _, i, o in spec.linears)
    assert q8.weights - qlora.weights == pytest.approx(linear * (1 - 0.5625), rel=0.01)


@pytest.mark.parametrize("argv,message", [
    (["--model", LLAMA7B, "--lora-rank", "8", "--lora-targets", "query"], "no such linear layer"),
    (["--model", LLAMA7B, "--quantize", "4bit"], "--quantize needs --lora-rank"),
    (["--model", LLAMA7B, "--lora-targets", "q_proj"], "--lora-targets needs --lora-rank"),
])
def test_lora_inputs_that_cannot_be_costed(run_cli, argv, message):
    code, _, err = run_cli("estimate", "--gpu", "24GB", *argv)
    assert code == 2 and message in err


def test_model_type_without_peft_default_asks_for_targets():
    spec = _spec(CONFIGS["phi3"])
    with pytest.raises(AdapterError, match="--lora-targets"):
        estimate(spec, Training(lora_rank=8))
