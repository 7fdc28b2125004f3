"""torch's flight-recorder dumps (`TORCH_NCCL_DEBUG_INFO_TEMP_FILE`, `TORCH_FR_BUFFER_SIZE`): the last collectives
one rank entered, read as data and never as code.

A dump is a pickle (`torch._C._distributed_c10d._dump_fr_trace`, what ProcessGroupNCCL writes on a watchdog timeout)
or its JSON form (`_dump_fr_trace_json`). A pickle is a program: loading one with `pickle.load` can run anything.
`DataOnlyUnpickler` refuses every opcode that looks up a global (`find_class`) or builds an object from one, so only
dicts, lists, tuples, strings, bytes, numbers, booleans and None come out; a dump that needs anything else is
refused in one line. What is kept per entry: the collective's sequence number, its operation, sizes and dtypes, its
state (scheduled, started, completed), when it was created and its timeout.
"""

from __future__ import annotations

import io
import json
import pickle
from typing import Any, Dict, List, Optional

from gpudoctor.errors import InputError

MAX_DUMP_BYTES = 64 * 1024 * 1024
KEPT_ENTRIES = 8  # the last collectives of each process group of a dump
KEPT_GROUPS = 8


class DumpError(InputError, ValueError):
    """A file that is not a flight-recorder dump gpudoctor reads (or one that asks to run code)."""


class DataOnlyUnpickler(pickle.Unpickler):
    """Plain data only: any global (a class, a function, `os.system`) is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        raise DumpError(f"refused to load {module}.{name}: a flight-recorder dump holds plain data only")

    def persistent_load(self, pid: Any) -> Any:
        raise DumpError("refused a persistent reference: a flight-recorder dump holds plain data only")


def looks_like_dump(head: bytes) -> bool:
    """A pickle (protocol 2 or later) or a JSON object that names flight-recorder keys."""
    if head[:1] == b"\x80" and head[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        return True
    start = head.lstrip()[:1]
    return start == b"{" and b'"entries"' in head and (b'"pg_config"' in head or b'"collective_seq_id"' in head)


def load(data: bytes, name: str) -> Dict[str, Any]:
    """The dump's dict (DumpError when it is neither a data-only pickle nor JSON of the dump's shape)."""
    if len(data) > MAX_DUMP_BYTES:
        raise DumpError(f"{name}: a flight-recorder dump over {MAX_DUMP_BYTES // 2 ** 20} MiB")
    try:
        if data[:1] == b"\x80":
            dump = DataOnlyUnpickler(io.BytesIO(data)).load()
        else:
            dump = json.loads(data.decode("utf-8", errors="replace"))
    except DumpError as exc:
        raise DumpError(f"{name}: {exc}") from None
    except (pickle.UnpicklingError, ValueError, EOFError, TypeError, IndexError, KeyError, AttributeError,
            RecursionError, MemoryError) as exc:
        raise DumpError(f"{name}: not a flight-recorder dump ({type(exc).__name__})") from None
    if not isinstance(dump, dict) or not isinstance(dump.get("entries"), list):
        raise DumpError(f"{name}: not a flight-recorder dump (no entries)")
    return dump


def _op(entry: Dict[str, Any]) -> str:
    """`nccl:all_reduce` → `ALLREDUCE`, the watchdog's spelling of the same collective."""
    name = str(entry.get("profiling_name") or "")
    return name.split(":", 1)[-1].replace("_", "").upper() if name else "?"


def _sizes(value: Any) -> Optional[List[List[int]]]:
    if not isinstance(value, list):
        return None
    return [[int(d) for d in shape if isinstance(d, int)] for shape in value[:4] if isinstance(shape, list)]


def _group(entry: Dict[str, Any]) -> str:
    """The process group's description (`default_pg`), else its name, else `pg N` by its id."""
    group = entry.get("process_group")
    if isinstance(group, (list, tuple)):
        for part in reversed(group[:2]):
            if isinstance(part, str) and part:
                return part
    return f"pg {entry.get('pg_id')}"


def collectives(dump: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The dump's last collectives (not point-to-point) of each process group, oldest first, each as the run facts
    keep them."""
    kept = []
    for entry in dump["entries"]:
        if not isinstance(entry, dict) or entry.get("is_p2p") or not isinstance(entry.get("collective_seq_id"), int):
            continue
        created = entry.get("time_created_ns")
        kept.append({
            "seq": entry["collective_seq_id"], "op": _op(entry),
            "group": _group(entry),
            "sizes": _sizes(entry.get("input_sizes")),
            "dtypes": [str(t) for t in entry.get("input_dtypes") or [] if isinstance(t, str)][:4] or None,
            "state": str(entry.get("state") or "") or None,
            "created_ns": created if isinstance(created, int) else None,
            "timeout_ms": entry.get("timeout_ms") if isinstance(entry.get("timeout_ms"), int) else None,
        })
    groups: Dict[str, List[Dict[str, Any]]] = {}
    for entry in kept:
        groups.setdefault(entry["group"], []).append(entry)
    last = [entry for group in list(groups.values())[-KEPT_GROUPS:] for entry in group[-KEPT_ENTRIES:]]
    return sorted(last, key=lambda e: (e["created_ns"] or 0))
