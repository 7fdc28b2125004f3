"""Data between ranks as JSON bytes in tensors, never pickle: a rank cannot make another run code.

torch's `gather_object` / `all_gather_object` / `broadcast_object_list` unpickle what other ranks send; these
helpers send `json.dumps(value)` as a uint8 tensor (padded to the longest rank's length) and parse it with
`json.loads`, so a compromised or buggy rank can at worst send a document the receiver rejects.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional


class ExchangeError(ValueError):
    """A rank sent bytes that are not a JSON document."""


def _encode(torch, value: Any, device):
    data = bytearray(json.dumps(value, separators=(",", ":")).encode("utf-8"))
    return torch.frombuffer(data, dtype=torch.uint8).to(device)


def _lengths(torch, dist, tensor, device) -> List[int]:
    mine = torch.tensor([tensor.numel()], dtype=torch.int64, device=device)
    lengths = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(lengths, mine)
    return [int(length.item()) for length in lengths]


def _padded(torch, tensor, size: int, device):
    out = torch.zeros(max(size, 1), dtype=torch.uint8, device=device)
    out[:tensor.numel()] = tensor
    return out


def _decode(tensor, length: int, rank: int) -> Any:
    try:
        return json.loads(bytes(tensor[:length].cpu().tolist()).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ExchangeError(f"rank {rank} sent data that is not JSON ({exc})") from None


def all_gather_json(dist, value: Any, device="cpu") -> List[Any]:
    """Every rank's `value`, in rank order, on every rank."""
    import torch

    mine = _encode(torch, value, device)
    lengths = _lengths(torch, dist, mine, device)
    size = max(max(lengths), 1)
    gathered = [torch.zeros(size, dtype=torch.uint8, device=device) for _ in lengths]
    dist.all_gather(gathered, _padded(torch, mine, size, device))
    return [_decode(tensor, length, rank) for rank, (tensor, length) in enumerate(zip(gathered, lengths))]


def gather_json(dist, value: Any, dst: int = 0, device="cpu") -> Optional[List[Any]]:
    """Every rank's `value`, in rank order, on rank `dst` (None on the others)."""
    import torch

    mine = _encode(torch, value, device)
    lengths = _lengths(torch, dist, mine, device)
    size = max(max(lengths), 1)
    me = dist.get_rank()
    gathered = [torch.zeros(size, dtype=torch.uint8, device=device) for _ in lengths] if me == dst else None
    dist.gather(_padded(torch, mine, size, device), gathered, dst=dst)
    if me != dst:
        return None
    return [_decode(tensor, length, rank) for rank, (tensor, length) in enumerate(zip(gathered, lengths))]


def broadcast_int(dist, value: int, src: int = 0, device="cpu") -> int:
    """Rank `src`'s integer on every rank."""
    import torch

    box = torch.tensor([int(value)], dtype=torch.int64, device=device)
    dist.broadcast(box, src)
    return int(box.item())
