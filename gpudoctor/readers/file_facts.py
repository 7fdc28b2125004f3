"""What one job file says, read once: the parts a format's reader fills, which the registry adds to a snapshot."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from gpudoctor.readers.env import ReadResult

PARTS = ("env", "script", "ds_config", "launch")  # in the order they join a snapshot


class BeyondBounds(Exception):
    """A file whose parsed shape is past its format's bound (its bytes are bounded before parsing): the reason, in
    words, as a line of the report."""


@dataclass
class FileFacts:
    env: Optional[ReadResult] = None  # the variables the file sets, with their lines, and what it could not read
    script: Any = None  # a training script's analysis (gpudoctor.readers.python.script.Analysis)
    ds_config: Any = None  # a DeepSpeed config as parsed (gpudoctor.readers.ds_config.Parsed)
    jobs: List[dict] = field(default_factory=list)  # the commands that start a training script (`launch`)
    pods: List[dict] = field(default_factory=list)  # Kubernetes containers and what they ask for (`launch`)
    note: Optional[str] = None  # the file was read but holds nothing gpudoctor checks (an info input)

