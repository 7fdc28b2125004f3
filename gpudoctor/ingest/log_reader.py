"""What the readers of lines (log_nccl, log_memory, log_failures) may use of the log reader that calls them
(gpudoctor.ingest.logs.LogScanner): said as a protocol, so that they need not import it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Tuple

from .log_window import Window


class LogReader(Protocol):
    window: Window  # the text around the line being read
    events: List[Dict[str, Any]]  # the events kept so far
    counts: Dict[str, int]  # events of each kind, kept or not
    nccl_env: Dict[str, Dict[str, str]]
    events_seen: int
    last_warn: Optional[str]
    below_pending: Optional[Tuple[str, str, str]]

    def event(self, name: str, kind: str, where: str, line: str, **fields: Any) -> None: ...

    def note(self, name: str) -> None: ...

    def host_entry(self, host: str) -> Dict[str, Any]: ...

    def message(self, name: str, where: str, line: str, anchors: Tuple[str, ...], explained: bool,
                shown: Optional[str] = None) -> None: ...
