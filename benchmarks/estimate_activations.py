"""The activation term of `gpudoctor estimate` against a measured training step on the CPU.

    python benchmarks/estimate_activations.py            # a table: measured vs estimated, per model and setting

Small models of real architectures (Llama, Qwen2, Phi-3, Gemma 2, GPT-2; transformers builds them from a config,
random weights, nothing downloaded) run one forward pass in bf16 in training mode with SDPA attention (eager for
Gemma 2). "Measured" is what autograd keeps for the backward pass: every tensor saved for backward
(torch.autograd.graph.saved_tensors_hooks), counted once per storage, parameters left out, plus the fp32 logits the
loss is computed from. With activation checkpointing the step also recomputes one layer during the backward pass:
that layer's saved tensors are added (measured without checkpointing, divided by the layers). "Estimated" is
gpudoctor.estimate.activation_bytes for the same shape and setting. The error is (estimated - measured) / measured.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
import transformers  # noqa: E402

from gpudoctor.estimate import (  # noqa: E402
    ModelSpec,  # noqa: E402
    Training,
    activation_bytes,
    count_params,
)

MODELS = {
    "llama": dict(model_type="llama", hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=8, vocab_size=32000, tie_word_embeddings=False),
    "qwen2": dict(model_type="qwen2", hidden_size=448, intermediate_size=2432, num_hidden_layers=4,
                  num_attention_heads=7, num_key_value_heads=1, vocab_size=32000, tie_word_embeddings=True),
    "phi3": dict(model_type="phi3", hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                 num_attention_heads=8, num_key_value_heads=4, vocab_size=32064, pad_token_id=0,
                 tie_word_embeddings=False),
    "gemma2": dict(model_type="gemma2", hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                   num_attention_heads=8, num_key_value_heads=4, head_dim=64, hidden_act="gelu_pytorch_tanh",
                   vocab_size=32000, tie_word_embeddings=True),
    "gpt2": dict(model_type="gpt2", hidden_size=512, num_hidden_layers=4, num_attention_heads=8, vocab_size=32000,
                 n_positions=1024),
}
ATTENTION = {"gemma2": "eager"}  # transformers has no SDPA path for Gemma 2 (its logit soft-capping)
SEQ, BATCH = 512, 2


def saved_bytes(model, ids) -> int:
    """Bytes autograd keeps for backward after one forward pass (each storage once, parameters left out)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages = {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        logits = model(input_ids=ids).logits.float()  # the loss is computed from fp32 logits
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), ids.view(-1))
    del loss
    return sum(storages.values())


def measure(name: str, checkpointing: bool) -> tuple:
    fields = dict(MODELS[name])
    attention = ATTENTION.get(name, "flash")
    config = transformers.AutoConfig.for_model(fields.pop("model_type"), **fields,
                                               attn_implementation="eager" if attention == "eager" else "sdpa")
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16).train()
    ids = torch.randint(0, fields["vocab_size"], (BATCH, SEQ))
    whole = saved_bytes(model, ids)
    measured = whole
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        logits_only = 4 * SEQ * BATCH * fields["vocab_size"]
        measured = saved_bytes(model, ids) + (whole - logits_only) // fields["num_hidden_layers"]
    total, shape = count_params({k: v for k, v in MODELS[name].items() if k != "pad_token_id"})
    spec = ModelSpec(source=name, params=total, kind="config", **shape)
    estimated = activation_bytes(spec, Training(precision="bf16", micro_batch=BATCH, seq_len=SEQ,
                                                checkpointing=checkpointing, attention=attention))
    return measured, estimated


def main() -> None:
    print(f"torch {torch.__version__}, transformers {transformers.__version__}; seq {SEQ}, micro batch {BATCH}, "
          "bf16, SDPA attention, training mode")
    print(f"{'model':8} {'checkpointing':14} {'measured MiB':>13} {'estimated MiB':>14} {'error':>8}")
    errors = []
    for name in MODELS:
        for checkpointing in (False, True):
            measured, estimated = measure(name, checkpointing)
            error = (estimated - measured) / measured
            errors.append(abs(error))
            print(f"{name:8} {'on' if checkpointing else 'off':14} {measured / 2**20:13.1f} "
                  f"{estimated / 2**20:14.1f} {error:+8.1%}")
    print(f"mean absolute error {sum(errors) / len(errors):.1%}")


if __name__ == "__main__":
    main()
