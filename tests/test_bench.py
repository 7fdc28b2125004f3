"""`gpudoctor bench nccl` / `bench train` run for real: gloo on CPU with 2 and 3 processes, torchrun, a real
training loop. The numbers printed are checked against the benchmark's own raw timings."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, gpudoctor_cmd

torch = pytest.importorskip("torch")

from gpudoctor.bench.nccl import BenchUsageError, bus_factor, make_config, sweep_sizes  # noqa: E402
from gpudoctor.bench.report import render_nccl  # noqa: E402

FAULTS = ROOT / "tests" / "faults"  # a sitecustomize that injects faults into every process of a command
CORRUPT, NAN_STEP = "GPUDOCTOR_TEST_CORRUPT_RANK", "GPUDOCTOR_TEST_NAN_STEP"

SMALL = ["-b", "64", "-e", "16K", "-n", "3", "-w", "1"]


def bench(*args, env_extra=None, prefix=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", CORRUPT, NAN_STEP):
        env.pop(name, None)
    if env_extra and {CORRUPT, NAN_STEP} & set(env_extra):
        env["PYTHONPATH"] = os.pathsep.join((str(FAULTS), str(ROOT)))
    env.update(env_extra or {})
    cmd = (prefix or gpudoctor_cmd()) + ["bench", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def nccl_json(*args, **kwargs):
    done = bench("nccl", *SMALL, "--format", "json", *args, **kwargs)
    return done, json.loads(done.stdout)


def check_numbers(result, world):
    """Every printed figure is re-derived from the rows' raw timings."""
    assert result["schema"] == "gpudoctor.bench.nccl/1"
    assert result["world_size"] == world and result["backend"] == "gloo" and result["device"] == "cpu"
    assert result["nodes"] == 1 and result["dtype"] == "float32"
    rows = result["rows"]
    assert [row["bytes"] for row in rows] == sweep_sizes(64, 16 * 1024)
    for row in rows:
        assert set(row) >= {"op", "bytes", "count", "dtype", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}
        assert row["count"] * 4 == row["bytes"]
        assert len(row["rank_time_us"]) == world
        assert row["time_us"] == pytest.approx(max(row["rank_time_us"]), abs=2e-3)  # the slowest rank
        algbw = row["bytes"] / (row["time_us"] * 1e-6) / 1e9
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-4, abs=1e-6)
        assert row["busbw_gbps"] == pytest.approx(algbw * 2 * (world - 1) / world, rel=1e-4, abs=1e-6)
        assert row["wrong"] == 0
    summary = result["summary"]
    large = rows[-3:]
    assert summary["large_from_bytes"] == large[0]["bytes"]
    assert summary["avg_busbw_gbps"] == pytest.approx(sum(r["busbw_gbps"] for r in large) / 3, abs=1e-6)
    assert summary["max_busbw_gbps"] == max(r["busbw_gbps"] for r in rows)
    assert summary["wrong"] == 0 and summary["ok"] is True
    assert result["findings"] == []


@pytest.mark.parametrize("world", [2, 3])
def test_all_reduce_numbers_match_raw_timings(world):
    done, result = nccl_json("--nprocs", str(world))
    assert done.returncode == 0, done.stderr
    check_numbers(result, world)
    assert result["launcher"] == "local"


def test_bus_factors_follow_nccl_tests():
    assert bus_factor("all_reduce", 2) == 1.0 and bus_factor("all_reduce", 3) == pytest.approx(4 / 3)
    assert bus_factor("all_reduce", 8) == 1.75
    assert bus_factor("all_gather", 4) == bus_factor("reduce_scatter", 4) == bus_factor("alltoall", 4) == 0.75
    assert bus_factor("broadcast", 8) == 1.0
    with pytest.raises(BenchUsageError, match="-b/--min-bytes: not a size: 'lots'"):
        make_config("lots", None)


def test_plain_table_prints_the_json_figures():
    rows = [{"op": "all_reduce", "bytes": b, "count": b // 4, "dtype": "float32", "time_us": t, "algbw_gbps": a,
             "busbw_gbps": a * 1.5, "wrong": 0} for b, t, a in ((8, 11.84, 0.0007), (1 << 30, 4702.94, 228.31))]
    result = {"op": "all_reduce", "backend": "nccl", "backend_version": "2.21.5", "world_size": 4, "nodes": 1,
              "dtype": "float32", "iters": 20, "warmup": 5, "rows": rows,
              "summary": {"large_from_bytes": 8, "avg_busbw_gbps": 171.2, "max_busbw_gbps": 342.465, "wrong": 0,
                          "min_busbw_gbps": 300.0, "ok": False}}
    text = render_nccl(result)
    assert text.splitlines()[0] == "all_reduce · nccl 2.21.5 · 4 ranks on 1 node · float32 · 20 iters, 5 warm-up"
    assert "1 GiB  268435456     4702.9       228.31       342.47       0" in text
    assert "avg busbw (sizes ≥ 8 B): 171.20 GB/s · required (--min-busbw): ≥ 300 GB/s  ✗" in text


def _every_op(rank, config):
    """A spawned worker: one process group, the real sweep of every op (saves a torch start-up per op)."""
    from dataclasses import replace

    import torch.distributed as dist

    from gpudoctor.bench import nccl

    device, _ = nccl.init_rank(rank, config)
    try:
        return {op: nccl.sweep(device, replace(config, op=op)) for op in nccl.OPS}
    finally:
        dist.destroy_process_group()


def test_every_collective_is_correct_on_3_ranks():
    from gpudoctor.bench.launch import run_ranks
    from gpudoctor.bench.nccl import OPS, NcclConfig

    _, results = run_ranks(_every_op, NcclConfig(min_bytes=1024, max_bytes=4096, iters=2, warmup=1, backend="gloo"), 3)
    assert sorted(results) == sorted(OPS)
    for op, rows in results.items():
        assert len(rows) == 3
        factor = {"all_reduce": 4 / 3, "broadcast": 1.0}.get(op, 2 / 3)
        for row in rows:
            assert row["wrong"] == 0 and row["op"] == op
            # both figures are rounded to 6 decimals on their own: their errors add up to (1 + factor) * 5e-7
            assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * factor, rel=1e-4, abs=(1 + factor) * 5e-7)
            if op in ("all_gather", "reduce_scatter", "alltoall"):
                assert row["count"] % 3 == 0  # one chunk per rank


def test_corrupted_reduction_is_counted_and_fires_gd701(tmp_path):
    out = tmp_path / "bench.json"
    done = bench("nccl", *SMALL, "--nprocs", "2", "--format", "json", "--output", str(out),
                 env_extra={CORRUPT: "1"})
    assert done.returncode == 1, done.stderr
    result = json.loads(out.read_text())
    assert all(row["wrong"] == row["count"] * 2 for row in result["rows"])  # every element, on both ranks
    assert result["summary"]["ok"] is False
    assert [f["rule"] for f in result["findings"]] == ["GD701"]
    # bench results are facts: a snapshot holding them replays GD701 through `check --snapshot`
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"schema": "gpudoctor.snapshot/1", "facts": {"bench": {"nccl": result}}}))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(gpudoctor_cmd() + ["check", "--snapshot", str(snapshot), "--select", "GD7", "--format",
                                             "json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert done.returncode == 1 and [f["rule"] for f in json.loads(done.stdout)["findings"]] == ["GD701"]


def test_min_busbw_missed_fires_gd702_and_plain_says_so():
    done = bench("nccl", *SMALL, "--nprocs", "2", "--min-busbw", "1e6")
    assert done.returncode == 1, done.stderr
    assert "#wrong" in done.stdout and "required (--min-busbw): ≥ 1e+06 GB/s  ✗" in done.stdout
    assert "GD702 nccl-bandwidth-low" in done.stdout and "GD701" not in done.stdout


def test_under_torchrun_it_uses_the_env_and_rank0_prints():
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                "-m", "gpudoctor"]
    done = bench("nccl", *SMALL, "--format", "json", prefix=torchrun, env_extra={"OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)  # exactly one document: only rank 0 prints
    assert result["launcher"] == "torchrun" and result["world_size"] == 2
    check_numbers(result, 2)


def test_usage_errors_exit_2():
    for args in (["-b", "lots"], ["-b", "1M", "-e", "1K"], ["--iters", "0"], ["--op", "gather"]):
        done = bench("nccl", *args)
        assert done.returncode == 2 and done.stderr.startswith("gpudoctor: error:"), done.stderr


TRAIN_SMALL = ["--steps", "4", "--warmup", "1", "--layers", "1", "--hidden", "64", "--heads", "2", "--seq-len", "32"]


def test_train_runs_real_steps_and_the_loss_goes_down():
    done = bench("train", *TRAIN_SMALL, "--format", "json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["schema"] == "gpudoctor.bench.train/1"
    assert result["device"] == "cpu" and result["world_size"] == 1 and result["precision"] == "fp32"
    model = result["model"]
    assert {k: model[k] for k in ("layers", "hidden", "heads", "seq_len", "micro_batch")} == {
        "layers": 1, "hidden": 64, "heads": 2, "seq_len": 32, "micro_batch": 4}
    assert model["params"] > 0 and result["steps"] == 4 and result["steps_completed"] == 4
    times = result["step_time_s"]
    assert 0 < times["min"] <= times["median"] <= times["max"]
    tokens = model["micro_batch"] * model["seq_len"]
    assert result["tokens_per_s"] == pytest.approx(tokens / times["median"])
    flops = tokens * (6 * model["params"] + 12 * model["layers"] * model["hidden"] * model["seq_len"])
    assert result["tflops"] == pytest.approx(flops / times["median"] / 1e12)
    assert result["mfu"] is None and result["peak_memory_kind"] == "process_peak_rss"
    assert result["peak_memory_bytes"] > 10 * 2**20
    assert result["loss"]["last"] < result["loss"]["first"]
    assert result["error"] is None and result["findings"] == []


def test_a_nan_loss_becomes_gd703_not_a_traceback():
    done = bench("train", *TRAIN_SMALL, env_extra={NAN_STEP: "2"})
    assert done.returncode == 1, done.stderr
    assert "GD703 train-step-failed" in done.stdout and "step 2" in done.stdout and "loss is nan" in done.stdout
    assert "steps: 1/4 timed" in done.stdout


def test_train_usage_errors_exit_2():
    done = bench("train", "--hidden", "65", "--heads", "2")
    assert done.returncode == 2 and "not divisible" in done.stderr
    done = bench("train", "--precision", "fp16", "--device", "cpu")
    assert done.returncode == 2 and "needs a GPU" in done.stderr


def test_one_rank_says_busbw_is_zero_by_definition_and_does_not_judge_it(tmp_path):
    done = bench("nccl", *SMALL, "--nprocs", "1", "--min-busbw", "5")
    assert done.returncode == 0, done.stderr
    assert "1 rank on 1 node" in done.stdout and "GD702" not in done.stdout
    assert (" busbw: 0 by definition on 1 rank (all_reduce moves no data between ranks); --min-busbw not judged"
            in done.stdout)
    done, result = nccl_json("--nprocs", "1", "--min-busbw", "5")
    summary = result["summary"]
    assert summary["busbw_zero_by_definition"] is True and summary["avg_busbw_gbps"] is None
    assert summary["ok"] is None and result["findings"] == []
    # replayed from a snapshot, GD702 is unknown: the threshold was never measured against
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"schema": "gpudoctor.snapshot/1", "facts": {"bench": {"nccl": result}}}))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(gpudoctor_cmd() + ["check", "--snapshot", str(snapshot), "--select", "GD702", "--format",
                                             "json"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    report = json.loads(done.stdout)
    assert [u["rule"] for u in report["unknown"]] == ["GD702"] and report["findings"] == []
