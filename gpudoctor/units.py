"""Byte units, said once: the constants and how sizes are written."""

from __future__ import annotations

import re
from typing import Optional

KiB = 1024
MiB = 1024**2
GiB = 1024**3
TiB = 1024**4
PiB = 1024**5

# A size as tools and people write it: a number, then B or a binary prefix with or without `iB`/`B` (79.14 GiB,
# 1187MiB, 24GB, 64K). Binary throughout: nvidia-smi, torch, DeepSpeed and nccl-tests print binary sizes, and
# write KB/MB/GB or K/M/G for KiB/MiB/GiB.
PREFIXES = "KMGTP"
SIZE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)[ \t]*(?:([KMGTP])(?:i?B)?|(B))?(?![A-Za-z])", re.IGNORECASE)


def size(num_bytes: Optional[int]) -> str:
    """`48 GiB`, `64 MiB`, `64 KiB`, `512 B` (whole units; `?` when unknown)."""
    if num_bytes is None:
        return "?"
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if num_bytes >= scale:
            return f"{num_bytes / scale:.0f} {unit}"
    return f"{num_bytes} B"


def gib(num_bytes: Optional[int]) -> str:
    """`79.2 GiB` (one decimal; `?` when unknown)."""
    return "?" if num_bytes is None else f"{num_bytes / GiB:.1f} GiB"


def _bytes(match: re.Match, bare: bool) -> Optional[int]:
    number, prefix, byte = match.groups()
    if not (prefix or byte or bare):
        return None
    power = PREFIXES.index(prefix.upper()) + 1 if prefix else 0
    return int(round(float(number) * 1024**power))


def parse(text: Optional[str], bare: bool = False) -> Optional[int]:
    """The bytes `text` says, the whole of it one size (`79.14 GiB`, `24GB`, `64K`); a number alone counts as bytes
    only when `bare` (nccl-tests' `-b 8`). None when it is not a size."""
    match = SIZE.fullmatch(str(text or "").strip())
    return _bytes(match, bare) if match else None


def find(text: Optional[str]) -> Optional[int]:
    """The bytes of the first size in a longer text (`1187MiB`, `| 81920 MiB |`); None when it holds none."""
    for match in SIZE.finditer(str(text or "")[:100]):
        found = _bytes(match, False)
        if found is not None:
            return found
    return None
