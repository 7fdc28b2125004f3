"""The `sh -c SCRIPT` of a container's `command`/`args`, walked once by the shell reader for its env and its jobs."""

from __future__ import annotations

import copy
from typing import Dict, List, Optional, Tuple

import yaml

from gpudoctor.readers.env import ReadResult
from gpudoctor.readers.k8s.nodes import line

SHELLS = {"sh", "bash", "env", "zsh", "dash"}  # by base name: /bin/bash, /usr/bin/env …
SCRIPT_FLAGS = ("-c", "-lc", "-ec", "-xc")


def script_node(items: List[yaml.ScalarNode]) -> Optional[yaml.ScalarNode]:
    """The script in a container's command and args (their scalar items, command first), when a shell runs one."""
    at = next((i for i, child in enumerate(items[:-1]) if child.value in SCRIPT_FLAGS and i > 0
               and items[i - 1].value.rsplit("/", 1)[-1] in SHELLS), None)
    return items[at + 1] if at is not None else None


class Scripts:
    """The scripts of one file, each walked once: the env reader asks with its container's scope, the pod reader
    takes the jobs of that same walk."""

    def __init__(self, path: str):
        self.path = path
        self.walked: Dict[Tuple[int, str, str], Tuple[ReadResult, List[dict]]] = {}

    def env(self, node: yaml.ScalarNode, scope: str, context: str) -> ReadResult:
        return self._walk(node, scope, context)[0]

    def jobs(self, node: yaml.ScalarNode) -> List[dict]:
        """The script's jobs (a copy: the pod reader completes them per container)."""
        walked = next((found for key, found in self.walked.items() if key[0] == id(node)), None)
        return copy.deepcopy((walked or self._walk(node, "", ""))[1])

    def _walk(self, node: yaml.ScalarNode, scope: str, context: str) -> Tuple[ReadResult, List[dict]]:
        from gpudoctor.readers.shell.jobs import read_script

        key = (id(node), scope, context)
        if key not in self.walked:
            offset = line(node) - 1 + (1 if node.style in ("|", ">") else 0)
            self.walked[key] = read_script(node.value, self.path, offset, scope, context)
        return self.walked[key]
