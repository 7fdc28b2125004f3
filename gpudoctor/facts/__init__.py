"""Read-only access to snapshot facts by dotted path, telling unknown (absent) from known-none (null).

Every read passes through `Facts.get`, which records, while a rule runs, which path it read, whether the snapshot
states it, and where it came from (its provenance: gpudoctor.provenance); gpudoctor.verdict decides from that. While
watched (`watching`), it also keeps the value each path had, so that a rule's verdict can be reused for another
node whose values at those paths are the same (gpudoctor.memo).

The modules of this package read facts for the rules (gpudoctor.checks) and whoever else needs the same answer:
which GPUs a job uses (`devices`), the CUDA it gets (`cuda`), the jobs the job files start and their scripts
(`jobs`), log lines as evidence (`log_evidence`), the NCCL settings a job gets and their value grammars
(`nccl_settings`, `nccl_values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from gpudoctor.facts import contract
from gpudoctor.provenance import PARTIAL, PROBE, origin_of

_RAISE = object()
T = TypeVar("T")
_ABSENT = object()
_EMPTY: Tuple[Any, ...] = (None, "", [], {})

STATED = "stated"  # a value that says something
ABSENT = "absent"  # known to be none: null or empty, or a variable a complete environment does not set
UNKNOWN = "unknown"  # not in the snapshot: nobody looked, or the source does not show it


class MissingFact(LookupError):
    """Raised when a rule asks for a fact the snapshot does not carry: the rule becomes UNKNOWN."""

    def __init__(self, path: str, reason: str = ""):
        super().__init__(path)
        self.path = path
        self.reason = reason  # why the fact cannot be had, where the path alone does not say it


@dataclass(frozen=True)
class Read:
    """One fact path a rule read: whether the snapshot states it (STATED, ABSENT, UNKNOWN) and its provenance."""

    state: str
    origin: str


_BOOKKEEPING = ("rules", "probes")  # what the engine adds to every snapshot's facts: not something a run states
NOWHERE = object()  # the value `value_at` gives, and `watching` keeps, for a path the facts do not hold
WHOLE = object()  # what `watching` keeps for a read of every fact at once (`Facts.data`)


@lru_cache(maxsize=4096)  # the rules read the same paths on every node of a fleet
def _parts(path: str) -> Tuple[str, ...]:
    """A path's segments; a variable's name after `env.` is one segment whatever it holds."""
    return ("env", path[4:]) if path.startswith("env.") else tuple(path.split("."))


class _Kept:
    """`with`: a new dict in one of a Facts' attributes (`reads`, `seen`) inside the block, the one before after it
    (a class: entered for every rule a node runs, cheaper than a generator)."""

    __slots__ = ("facts", "name", "saved")

    def __init__(self, facts: Facts, name: str):
        self.facts, self.name = facts, name

    def __enter__(self) -> Dict[str, Any]:
        self.saved = getattr(self.facts, self.name)
        kept: Dict[str, Any] = {}
        setattr(self.facts, self.name, kept)
        return kept

    def __exit__(self, *exc: object) -> None:
        setattr(self.facts, self.name, self.saved)


class Facts:
    """A view over the `facts` object of a snapshot. `origins` maps a fact path (a group, or a deeper path) to where
    it came from; a path none of them covers came from `base`. Inside `recording()`, `reads` holds every path read
    (one entry per path: its state and origin)."""

    def __init__(self, data: Mapping[str, Any], origins: Optional[Mapping[str, str]] = None, base: str = PROBE):
        self._data = data
        self._origins = dict(origins or {})
        self.base = base
        self.reads: Optional[Dict[str, Read]] = None
        self.seen: Optional[Dict[str, Any]] = None  # inside watching(): each path read, and its value or NOWHERE
        self._strict: Optional[Dict[str, Any]] = {} if contract.strict() else None  # tests: what each path read
        self._whole_env: Optional[bool] = None  # the job's environment is shown whole (_unset)
        self._derived: Dict[Callable, tuple] = {}  # once(): what a function of the facts gave, and its reads

    def recording(self) -> _Kept:
        """Record the reads made inside the block (one rule's run) into the yielded dict."""
        return _Kept(self, "reads")

    def watching(self) -> _Kept:
        """Keep, in the yielded dict, every path read inside the block (bookkeeping too) and the value it had there
        (NOWHERE where the facts do not hold it; WHOLE for `data`)."""
        return _Kept(self, "seen")

    def once(self, compute: Callable[[Facts], T]) -> T:
        """`compute(self)`, worked out once however many rules ask for it (the GPUs a job uses: facts.devices); each
        rule that asks gets the reads it made recorded as its own, as if it had made them (and their values watched),
        and the MissingFact it raised raised again."""
        if compute not in self._derived:
            saved = self.reads, self.seen
            self.reads, self.seen = {}, {}
            try:
                self._derived[compute] = (compute(self), None, self.reads, self.seen)
            except MissingFact as raised:
                self._derived[compute] = (None, raised, self.reads, self.seen)
            finally:
                self.reads, self.seen = saved
        value, missing, reads, seen = self._derived[compute]
        if self.reads is not None:
            for path, read in reads.items():
                self.reads.setdefault(path, read)
        if self.seen is not None:
            for path, found in seen.items():
                self.seen.setdefault(path, found)
        if missing is not None:
            raise missing.with_traceback(None)
        return value

    def origin(self, path: str) -> str:
        """Where the fact at `path` came from (gpudoctor.provenance)."""
        return origin_of(self._origins, path, self.base)

    def _note(self, path: str, state: str, value: Any) -> None:
        """The one place every read passes (a check of each path against the fact schema belongs here): recorded
        while a rule runs (engine.evaluate), its value kept while watched."""
        if self.seen is not None:
            self.seen.setdefault(path, value)
        if self.reads is not None and path not in self.reads and not path.startswith(_BOOKKEEPING):
            self.reads[path] = Read(state, self.origin(path))

    @property
    def data(self) -> Mapping[str, Any]:
        """Every fact at once (a site policy's conditions read them as a tree)."""
        self._note("*", STATED if self._data else ABSENT, WHOLE)
        return self._data

    def value_at(self, path: str) -> Any:
        """The value the facts hold at `path` as `get` finds it, NOWHERE where they hold none; nothing recorded."""
        node: Any = self._data
        for part in _parts(path):
            if (type(node) is dict or isinstance(node, Mapping)) and part in node:
                node = node[part]
            else:
                return NOWHERE
        return node

    def get(self, path: str, default: Any = _RAISE) -> Any:
        """The fact at `path` (`"nvml.driver_version"`); raise MissingFact if unknown and no default given. A
        variable a complete environment does not set (`"env.NCCL_DEBUG"`) is known: None. In tests, a path or a
        record key that rules/facts.toml does not declare raises (gpudoctor.facts.contract)."""
        shape = contract.declared(list(_parts(path))) if self._strict is not None else None
        node = self.value_at(path)
        if node is NOWHERE:
            if self._unset(path):
                self._note(path, ABSENT, NOWHERE)
                return None if default is _RAISE else default
            self._note(path, UNKNOWN, NOWHERE)
            if default is _RAISE:
                raise self._missing(path)
            return default
        self._note(path, ABSENT if node in _EMPTY else STATED, node)
        if shape is None or self._strict is None:
            return node
        if path not in self._strict:
            self._strict[path] = contract.guarded(node, shape, path)
        return self._strict[path]

    def _unset(self, path: str) -> bool:
        """Whether the path is a variable the job's environment, shown whole, does not set."""
        if not path.startswith("env."):
            return False
        if self._whole_env is None:  # asked for every variable a rule reads and the job does not set: decided once
            self._whole_env = isinstance(self._data.get("env"), Mapping) and self.origin("env") not in PARTIAL
        return self._whole_env

    def _missing(self, path: str) -> MissingFact:
        if path.startswith("env."):  # a pasted report shows only some variables, or none
            what = "log" if self.origin("env") == "log" else "report"
            return MissingFact("env", f"the {what} does not show the job's environment ({path[4:]})")
        return MissingFact(path)

    def has(self, path: str) -> bool:
        return self.get(path, _ABSENT) is not _ABSENT

    def env(self, name: str, default: Any = None) -> Any:
        """An environment variable as the job will see it (`default` when unset or not shown)."""
        value = self.get("env." + name, _ABSENT)
        return default if value is _ABSENT or value is None else value
