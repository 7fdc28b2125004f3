"""Whether a benchmark's result (`bench.nccl`: `gpudoctor bench nccl`, or pasted nccl-tests output) measured
anything."""

from __future__ import annotations

from gpudoctor.facts import MissingFact


def measured(result: dict) -> dict:
    """`result`, where it measured something (a size's row, its average bus bandwidth, nccl-tests' out-of-bounds
    check); MissingFact where the benchmark failed before its first size (nccl-tests' `Test CUDA failure …` alone)."""
    average = (result.get("summary") or {}).get("avg_busbw_gbps")
    if not result.get("rows") and result.get("out_of_bounds") is None and average is None:
        raise MissingFact("bench.nccl.rows", "the benchmark output shows no size measured (it stopped before the "
                                             "first)")
    return result
