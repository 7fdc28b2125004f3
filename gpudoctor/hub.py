"""A model named by its Hugging Face Hub id (`--model Qwen/Qwen2.5-0.5B`): its config.json from the local Hugging
Face cache when it is there, else the hyper-parameters of rules/models.toml. Nothing is ever downloaded.

The cache layout is huggingface_hub's: `<cache>/models--ORG--NAME/refs/<revision>` holds a commit hash and
`snapshots/<hash>/config.json` the file; `<cache>` is `HF_HUB_CACHE`, else `HF_HOME/hub`, else
`XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub` (huggingface_hub's constants.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Optional, Tuple

from gpudoctor.knowledge import table

# huggingface_hub's validate_repo_id: `name` or `org/name`, letters, digits and -_. (no `--` or `..`)
_HUB_ID = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
_CONFIG_FIELDS = ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "head_dim", "hidden_act", "vocab_size", "tie_word_embeddings",
                  "attention_bias", "num_local_experts", "n_positions")


def looks_like_hub_id(text: str) -> bool:
    """`Qwen/Qwen2.5-0.5B`, `gpt2`: the shape of a Hub id (the caller has ruled out a size and an existing path)."""
    return bool(_HUB_ID.match(text)) and "--" not in text and ".." not in text


def cache_dir(env: Optional[Mapping[str, str]] = None) -> Path:
    """The hub cache huggingface_hub would use with this environment."""
    env = os.environ if env is None else env
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    base = Path(env["XDG_CACHE_HOME"]).expanduser() if env.get("XDG_CACHE_HOME") else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def cached_config(hub_id: str, env: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """The config.json of `hub_id` in the local cache (the `main` revision first, else the newest snapshot)."""
    repo = cache_dir(env) / ("models--" + hub_id.replace("/", "--"))
    try:
        revision = (repo / "refs" / "main").read_text(encoding="utf-8").strip()
        if re.fullmatch(r"[0-9a-f]{40}", revision) and (repo / "snapshots" / revision / "config.json").is_file():
            return repo / "snapshots" / revision / "config.json"
    except OSError:
        pass
    try:
        found = [path for path in (repo / "snapshots").glob("*/config.json") if path.is_file()]
    except OSError:
        return None
    return max(found, key=lambda path: path.stat().st_mtime) if found else None


def known_model(hub_id: str) -> Optional[dict]:
    """The rules/models.toml entry for `hub_id` (its id or one of `also`, case-insensitive; `ORG/` optional)."""
    wanted = hub_id.lower()
    for entry in table("models").get("model", []):
        names = [entry["id"], *entry.get("also", [])]
        if any(wanted in (name.lower(), name.lower().split("/")[-1]) for name in names):
            return entry
    return None


def hub_config(hub_id: str, env: Optional[Mapping[str, str]] = None) -> Tuple[Optional[Path], Optional[dict], str]:
    """(config.json path in the cache, or None; the table entry as a config, or None; where it came from)."""
    path = cached_config(hub_id, env)
    if path is not None:
        return path, None, f"the local Hugging Face cache ({path})"
    entry = known_model(hub_id)
    if entry is None:
        return None, None, ""
    config = {key: entry[key] for key in _CONFIG_FIELDS if key in entry}
    return None, config, f"gpudoctor's table of published configs ({entry['id']}: {entry['source']})"
