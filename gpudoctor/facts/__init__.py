"""Read-only access to snapshot facts by dotted path, telling unknown (absent) from known-none (null).

The modules of this package read facts for the rules (gpudoctor.checks) and whoever else needs the same answer:
which GPUs a job uses (`devices`), the CUDA it gets (`cuda`), the jobs the job files start and their scripts
(`jobs`), log lines as evidence (`log_evidence`), the NCCL settings a job gets and their value grammars
(`nccl_settings`, `nccl_values`).
"""

from __future__ import annotations

from typing import Any, Mapping

_RAISE = object()
_ABSENT = object()


class MissingFact(LookupError):
    """Raised when a rule asks for a fact the snapshot does not carry: the rule becomes UNKNOWN."""

    def __init__(self, path: str, reason: str = ""):
        super().__init__(path)
        self.path = path
        self.reason = reason  # why the fact cannot be had, where the path alone does not say it


_BOOKKEEPING = ("rules", "probes")  # what the engine adds to every snapshot's facts: not something a text states


class Facts:
    """A view over the `facts` object of a snapshot. `stated` counts the reads that found a value that says
    something (not absent, None or empty): a rule that read none has judged nothing (see engine.evaluate);
    `stated_beyond_logs` those of facts other than a log's, so that a verdict from log facts alone is known."""

    def __init__(self, data: Mapping[str, Any], env_complete: bool = True):
        self._data = data
        self.env_complete = env_complete  # False: `env` holds only what a pasted text showed (LD_LIBRARY_PATH lines)
        self.stated = 0
        self.stated_beyond_logs = 0

    @property
    def data(self) -> Mapping[str, Any]:
        self.stated += 1
        self.stated_beyond_logs += 1
        return self._data

    def get(self, path: str, default: Any = _RAISE) -> Any:
        """The fact at `path` (`"nvml.driver_version"`); raise MissingFact if absent and no default given."""
        node: Any = self._data
        for part in path.split("."):
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            else:
                if default is _RAISE:
                    raise MissingFact(path)
                return default
        if node not in (None, "", [], {}) and not path.startswith(_BOOKKEEPING):
            self.stated += 1
            if path.split(".", 1)[0] != "logs":
                self.stated_beyond_logs += 1
        return node

    def has(self, path: str) -> bool:
        return self.get(path, _ABSENT) is not _ABSENT

    def env(self, name: str, default: Any = None) -> Any:
        """An environment variable as the job will see it (None when unset)."""
        return self.get("env", {}).get(name, default)

    def env_recorded(self, name: str) -> Any:
        """env(name), but MissingFact where the job's environment was not recorded (a pasted report without
        --env-file): there an unset variable is not known to be unset."""
        if not self.env_complete or self.get("env", None) is None:
            raise MissingFact("env", f"the report does not show the job's environment ({name})")
        return self.env(name)
