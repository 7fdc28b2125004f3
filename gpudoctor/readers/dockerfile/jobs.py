"""The job a Dockerfile's final stage starts: `ENTRYPOINT` then `CMD` (exec form `["torchrun", …]` or shell form,
which Docker runs with `/bin/sh -c`). The GPUs come from `docker run --gpus`, so they stay unknown here."""

from __future__ import annotations

import json
import re
from typing import List, Optional, Tuple

from gpudoctor.readers import commands
from gpudoctor.readers.dockerfile.env import instructions
from gpudoctor.readers.launch import finish_job


def _form(body: str) -> Tuple[Optional[List[str]], bool]:
    """(words, exec form?) of an ENTRYPOINT/CMD argument."""
    text = body.strip()
    if text.startswith("["):
        try:
            words = json.loads(text)
        except ValueError:
            return None, True
        return ([str(w) for w in words] if isinstance(words, list) else None), True
    return text.split(), False


def jobs(text: str, path: str, parsed: Optional[Tuple[list, str]] = None) -> List[dict]:
    """The job of the final stage; `parsed`: the text's `instructions`, when the caller has them."""
    steps, _ = parsed or instructions(text)
    entrypoint: Tuple[Optional[List[str]], int] = (None, 0)
    cmd: Tuple[Optional[List[str]], int] = (None, 0)
    stages: dict = {}
    torch: Optional[dict] = None
    for line, body, _chars in steps:
        match = re.match(r"^\s*([A-Za-z]+)\s+(.*)$", body, re.S)
        if not match:
            continue
        keyword = match.group(1).upper()
        if keyword == "FROM":
            entrypoint, cmd = (None, 0), (None, 0)  # each stage starts afresh; the last one runs
            image, _, alias = (re.sub(r"--\S+\s+", "", match.group(2).strip()) + "  ").partition(" ")
            alias = alias.split()[-1] if alias.split()[:1] in (["AS"], ["as"]) else ""
            torch = stages.get(image, _torch_of(image, line))
            if alias:
                stages[alias] = torch
        elif keyword in ("ENTRYPOINT", "CMD"):
            words, _ = _form(match.group(2))
            if keyword == "ENTRYPOINT":
                entrypoint, cmd = (words, line), (None, 0)
            else:
                cmd = (words, line)
    words = (entrypoint[0] or []) + (cmd[0] or [])
    line = entrypoint[1] or cmd[1]
    if not words:
        return []
    if len(words) > 2 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] in ("-c", "-lc"):
        words = " ".join(words[2:]).split()
    parsed = commands.parse([(word, "$" not in word) for word in words], line)
    if parsed is None:
        return []
    job = {"path": path, "line": line, "kind": "dockerfile", "context": "the image's ENTRYPOINT/CMD",
           "conditional": False, "launchers": parsed["launchers"], "script": parsed["script"],
           "env_sets": [], "gpus": None, "command": " ".join(words)[:200]}
    if torch:
        job["torch"] = torch
    return [finish_job(job)]


def _torch_of(image: str, line: int) -> Optional[dict]:
    """The torch version an official `pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime` image ships (its tag says)."""
    match = re.fullmatch(r"(?:docker\.io/)?pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)(?:-\S*)?", image)
    return {"version": match.group(1), "line": line, "what": f"FROM {image}"} if match else None
