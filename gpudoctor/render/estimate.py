"""The memory estimate (`gpudoctor estimate`) as a plain table or a rich one."""

from __future__ import annotations

from typing import List

from gpudoctor.estimate import ACTIVATION_FORMULAS, Estimate
from gpudoctor.remedies import lines as remedy_lines
from gpudoctor.units import gib

ADAPTER_DESCRIPTIONS = {
    "weights": "the frozen base (16-bit, or 4/8-bit linear layers and the rest fp32) + fp32 LoRA adapters",
    "gradients": "the adapters' fp32 gradients only",
    "optimizer": "the adapters' fp32 optimizer states only",
}


def _descriptions(est: Estimate) -> dict:
    """What each term counts, for the setup that was estimated (ZeRO stage, attention, checkpointing, LoRA)."""
    a = est.assumptions
    stage = a["zero_stage"]
    moments = {"sgd": "SGD: momentum", "adamw8bit": "8-bit AdamW: 8-bit momentum + variance"}.get(
        a["optimizer"], "Adam: momentum + variance")
    optimizer = moments if a["precision"] == "fp32" else moments.replace(": ", ": fp32 master + ", 1)
    gated = a["formulas"]["activations"] == ACTIVATION_FORMULAS["gated"]
    layer, source = ("(6h per norm + 10q + 8kv + 8i)·sb", "transformers' gated decoder") if gated else (
        "34sbh", "Korthikanti et al.")
    if a["attention"] == "eager":
        per_layer = f"{layer} + 5as²b per layer (eager attention keeps the a·s² scores)"
    else:
        per_layer = f"{layer} per layer (flash/SDPA attention keeps no a·s² scores)"
    if a["activation_checkpointing"]:
        per_layer = f"2sbh per layer (checkpointed) + one layer's {per_layer.replace(' per layer', '')}"
    described = {
        "weights": "parameters in the training precision" + (
            " (ZeRO-3: a 1/N partition + the largest layer gathered)" if stage == 3 else ""),
        "gradients": "gradients" + (" (ZeRO-2/3: partitioned)" if stage >= 2 else "") + (
            "; DeepSpeed adds an fp32 partition" if a["engine"] == "deepspeed" and a["precision"] != "fp32" else ""),
        "optimizer": optimizer + (" (ZeRO-1+: partitioned)" if stage >= 1 else "") + (
            "; offloaded to the host" if a["offload"]["optimizer"] != "none" and stage >= 1 else ""),
        "activations": f"{source}: {per_layer} + 4sbv logits",
        "overhead": "CUDA context, workspaces, NCCL buffers, fragmentation",
    }
    return {**described, **(ADAPTER_DESCRIPTIONS if a.get("lora") else {})}


def _assumption_lines(est: Estimate) -> List[str]:
    a, sources = est.assumptions, est.assumptions.get("sources", {})
    keys = ("precision", "optimizer", "zero_stage", "micro_batch", "seq_len", "world_size")
    parts = [f"{k}={a[k]} ({sources.get(k, 'default')})" for k in keys]
    offload = a["offload"]
    parts.append(f"offload=optimizer:{offload['optimizer']},param:{offload['param']} "
                 f"({sources.get('offload_optimizer', 'default')})")
    parts.append(f"activation_checkpointing={a['activation_checkpointing']} "
                 f"({sources.get('checkpointing', 'default')})")
    parts.append(f"attention={a['attention']} ({sources.get('attention', 'default')})")
    lora = a.get("lora")
    if lora:
        parts.append(f"lora_rank={lora['rank']}, lora_targets={','.join(lora['targets'])}, "
                     f"quantize={lora['quantize'] or 'none'} (flag)")
    matched = [f"gpu: {a['gpus_from']}"] if a.get("gpus_from", "").startswith("--gpu") else []
    return matched + ["assumptions: " + ", ".join(parts)] + [f"note: {note}" for note in a.get("notes", [])]


def render_plain(est: Estimate, gpus, stream) -> None:
    from gpudoctor.render.terminal import width, wrap

    line_width = width(stream)
    lines = wrap(f"model {est.assumptions['model']}: {est.params:,} parameters", line_width, "", "  ")
    terms = [(name, gib(value) if value is not None else "not estimated", _descriptions(est)[name])
             for name, value in est.breakdown().items()]
    terms += [("total", gib(est.total), "per GPU"),
              ("host RAM", gib(est.host_bytes), "per node (DeepSpeed's estimator, × 1.5)")]
    for name, shown, what in terms:
        first = f"  {name:<12} {shown:>14}   "
        lines += wrap(what, line_width, first, " " * len(first))
    lines += [] if gpus else ["GPUs: none found (give --gpu NAME)"]
    for text in [_gpu_line(row, est) for row in est.gpu_rows(gpus)]:
        lines += wrap(text, line_width, "", "  ")
    plan = remedy_lines(est.remedies)
    if plan:
        lines += wrap(_plan_heading(est), line_width, "", "  ")
    for text, how in plan:
        lines += wrap(text, line_width, "  ", "      ")
        lines += wrap(how, line_width, "      ", "      ") if how else []
    for text in _assumption_lines(est):
        lines += wrap(text, line_width, "", "  ")
    stream.write("\n".join(lines) + "\n")


def _plan_heading(est: Estimate) -> str:
    memory = est.remedies["memory_bytes"] if est.remedies else 0
    return f"what would make it fit in {gib(memory)}, largest saving first:"


def _gpu_line(row: dict, est: Estimate) -> str:
    """The verdict for one GPU; one that leaves a term out (activations of a model given as a size) says so."""
    if row["memory_bytes"] is None:
        return f"{row['name']}: memory unknown"
    left_out = "" if est.activations_known else " without the activations (not estimated)"
    if row["headroom_bytes"] < 0:
        return (f"{row['name']} ({gib(row['memory_bytes'])}): does NOT fit{left_out}, "
                f"{gib(-row['headroom_bytes'])} short")
    share = row["headroom_bytes"] / row["memory_bytes"]
    verdict = ("fits" if share >= 0.10 else "fits, with under 10 % headroom") + left_out
    return f"{row['name']} ({gib(row['memory_bytes'])}): {verdict}, {gib(row['headroom_bytes'])} free ({share:.0%})"


def render_rich(est: Estimate, gpus, stream) -> None:
    from rich.markup import escape
    from rich.table import Table

    from gpudoctor.render.terminal import say, screen

    with screen(stream, True) as console:
        table = Table(title=f"{escape(str(est.assumptions['model']))}: {est.params:,} parameters",
                      title_justify="left")
        table.add_column("term", no_wrap=True)
        table.add_column("per GPU", justify="right", no_wrap=True)
        table.add_column("what")
        for name, value in est.breakdown().items():
            table.add_row(name, gib(value) if value is not None else "not estimated", escape(_descriptions(est)[name]))
        table.add_row("[bold]total[/]", f"[bold]{gib(est.total)}[/]", "per GPU")
        table.add_row("host RAM", gib(est.host_bytes), "per node (DeepSpeed's estimator, × 1.5)")
        console.print(table, soft_wrap=False)
        if not gpus:
            console.print("GPUs: none found (give --gpu NAME)")
        for row in est.gpu_rows(gpus):
            colour = "red" if row["fits"] is False else "green" if row["fits"] and (
                row["headroom_bytes"] >= 0.1 * row["memory_bytes"]) else "yellow"
            say(console, _gpu_line(row, est), rest="  ", style=colour)
        plan = remedy_lines(est.remedies)
        if plan:
            say(console, _plan_heading(est), rest="  ", style="bold")
        for text, how in plan:
            say(console, "  " + text, rest="      ")
            if how:
                say(console, "      " + how, rest="      ", style="cyan")
        for line in _assumption_lines(est):
            say(console, line, rest="  ", style="dim")
