"""The job a Dockerfile's final stage starts: `ENTRYPOINT` then `CMD` (exec form `["torchrun", …]` or shell form,
which Docker runs with `/bin/sh -c`). The GPUs come from `docker run --gpus`, so they stay unknown here."""

from __future__ import annotations

import json
import re
from typing import List, Optional, Tuple

from gpudoctor.readers import commands
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


class JobReader:
    """The job of the final stage, read instruction by instruction (env.walk): each FROM starts afresh (and names
    the torch its image ships), ENTRYPOINT resets CMD."""

    def __init__(self, path: str):
        self.path = path
        self.entrypoint: Tuple[Optional[List[str]], int] = (None, 0)
        self.cmd: Tuple[Optional[List[str]], int] = (None, 0)
        self.stages: dict = {}
        self.torch: Optional[dict] = None

    def instruction(self, keyword: str, line: int, rest: str) -> None:
        if keyword == "FROM":
            self.entrypoint, self.cmd = (None, 0), (None, 0)  # each stage starts afresh; the last one runs
            image, _, alias = (re.sub(r"--\S+\s+", "", rest.strip()) + "  ").partition(" ")
            alias = alias.split()[-1] if alias.split()[:1] in (["AS"], ["as"]) else ""
            self.torch = self.stages.get(image, _torch_of(image, line))
            if alias:
                self.stages[alias] = self.torch
        elif keyword == "ENTRYPOINT":
            self.entrypoint, self.cmd = (_form(rest)[0], line), (None, 0)
        elif keyword == "CMD":
            self.cmd = (_form(rest)[0], line)

    def finish(self) -> List[dict]:
        words = (self.entrypoint[0] or []) + (self.cmd[0] or [])
        line = self.entrypoint[1] or self.cmd[1]
        if not words:
            return []
        if len(words) > 2 and words[0].rsplit("/", 1)[-1] in ("sh", "bash") and words[1] in ("-c", "-lc"):
            words = " ".join(words[2:]).split()
        parsed = commands.parse([(word, "$" not in word) for word in words], line)
        if parsed is None:
            return []
        job = {"path": self.path, "line": line, "kind": "dockerfile", "context": "the image's ENTRYPOINT/CMD",
               "conditional": False, "launchers": parsed["launchers"], "script": parsed["script"],
               "env_sets": [], "gpus": None, "command": " ".join(words)[:200]}
        if self.torch:
            job["torch"] = self.torch
        return [finish_job(job)]


def _torch_of(image: str, line: int) -> Optional[dict]:
    """The torch version an official `pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime` image ships (its tag says)."""
    match = re.fullmatch(r"(?:docker\.io/)?pytorch/pytorch:(\d+\.\d+(?:\.\d+)?)(?:-\S*)?", image)
    return {"version": match.group(1), "line": line, "what": f"FROM {image}"} if match else None
