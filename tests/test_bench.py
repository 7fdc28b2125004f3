"""`gpudoctor bench nccl` / `bench train` run for real: gloo on CPU with 1, 2 and 3 processes, torchrun, a real
training loop. The numbers printed are checked against the benchmark's own raw timings.

The CLI runs in this process (its ranks are real spawned processes, their output captured at the file-descriptor
level); only the torchrun test starts the CLI as a command, since the launcher is what it is about. Faults are
injected into the spawned ranks by tests/faults/sitecustomize.py on their PYTHONPATH."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from importlib import util

import pytest
from conftest import ROOT

torch = pytest.importorskip("torch")

from gpudoctor.bench import nccl as nccl_module  # noqa: E402
from gpudoctor.bench.nccl import OPS, BenchUsageError, bus_factor, make_config, sweep_sizes  # noqa: E402
from gpudoctor.bench.report import render_nccl  # noqa: E402
from gpudoctor.cli import main  # noqa: E402

FAULTS = ROOT / "tests" / "faults"  # a sitecustomize that injects faults into every process of a command
CORRUPT, NAN_STEP = "GPUDOCTOR_TEST_CORRUPT_RANK", "GPUDOCTOR_TEST_NAN_STEP"

SMALL = ["-b", "64", "-e", "16K", "-n", "3", "-w", "1"]


@pytest.fixture
def cli(capfd, monkeypatch):
    """`gpudoctor …` in this process: (exit code, stdout, stderr of the CLI and of every rank it spawned).
    `faults` names the variables of tests/faults/sitecustomize.py the spawned ranks get."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", CORRUPT, NAN_STEP):
        monkeypatch.delenv(name, raising=False)

    def run(*args, faults=None):
        if faults:
            monkeypatch.setenv("PYTHONPATH", os.pathsep.join((str(FAULTS), str(ROOT))))
            for name, value in faults.items():
                monkeypatch.setenv(name, value)
        code = main([str(arg) for arg in args])
        out, err = capfd.readouterr()
        assert "Traceback" not in err, err
        return code, out, err

    return run


def _replay(cli, tmp_path, result: dict, select: str) -> dict:
    """bench results are facts: `check --snapshot` of a snapshot holding them, as JSON."""
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps({"schema": "gpudoctor.snapshot/1", "facts": {"bench": {"nccl": result}}}))
    code, out, _ = cli("check", "--snapshot", snapshot, "--select", select, "--format", "json")
    return dict(json.loads(out), exit_code=code)


def check_numbers(result, world, op="all_reduce", sizes=(64, 16 * 1024)):
    """Every printed figure is re-derived from the rows' raw timings."""
    assert result["schema"] == "gpudoctor.bench.nccl/1" and result["op"] == op
    assert result["world_size"] == world and result["backend"] == "gloo" and result["device"] == "cpu"
    assert result["nodes"] == 1 and result["dtype"] == "float32"
    rows = result["rows"]
    if op in ("all_gather", "reduce_scatter", "alltoall"):  # one chunk per rank: the count rounds down
        assert all(row["count"] % world == 0 for row in rows)
        assert len(rows) == len(sweep_sizes(*sizes))
    else:
        assert [row["bytes"] for row in rows] == sweep_sizes(*sizes)
    factor = {"all_reduce": 2 * (world - 1) / world, "broadcast": 1.0}.get(op, (world - 1) / world)
    for row in rows:
        assert set(row) >= {"op", "bytes", "count", "dtype", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}
        assert row["op"] == op and row["count"] * 4 == row["bytes"]
        assert len(row["rank_time_us"]) == world
        assert row["time_us"] == pytest.approx(max(row["rank_time_us"]), abs=2e-3)  # the slowest rank
        algbw = row["bytes"] / (row["time_us"] * 1e-6) / 1e9
        assert row["algbw_gbps"] == pytest.approx(algbw, rel=1e-4, abs=1e-6)
        # both figures are rounded to 6 decimals on their own: their errors add up to (1 + factor) * 5e-7
        assert row["busbw_gbps"] == pytest.approx(algbw * factor, rel=1e-4, abs=(1 + factor) * 5e-7)
        assert row["wrong"] == 0
    summary = result["summary"]
    large = rows[-3:]
    assert summary["large_from_bytes"] == large[0]["bytes"]
    assert summary["avg_busbw_gbps"] == pytest.approx(sum(r["busbw_gbps"] for r in large) / 3, abs=1e-6)
    assert summary["max_busbw_gbps"] == max(r["busbw_gbps"] for r in rows)
    assert summary["wrong"] == 0 and summary["ok"] is True


@pytest.mark.slow
def test_all_reduce_numbers_match_raw_timings_on_2_ranks(cli):
    code, out, err = cli("bench", "nccl", *SMALL, "--format", "json", "--nprocs", "2")
    assert code == 0, err
    result = json.loads(out)
    check_numbers(result, 2)
    assert result["launcher"] == "local" and result["findings"] == []


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


def test_the_table_fits_80_columns_and_says_it_measures_gloo_on_cpu():
    rows = [{"op": "all_reduce", "bytes": b, "count": b // 4, "dtype": "float32", "time_us": 1e6, "algbw_gbps": a,
             "busbw_gbps": a, "wrong": 0} for b, a in ((1 << 10, 0.01), (1 << 20, 0.9))]
    result = {"op": "all_reduce", "backend": "gloo", "backend_version": None, "world_size": 2, "nodes": 1,
              "dtype": "float32", "iters": 20, "warmup": 5, "rows": rows, "device": "cpu",
              "summary": {"large_from_bytes": 8, "avg_busbw_gbps": 0.5, "max_busbw_gbps": 0.9, "wrong": 0}}
    text = render_nccl(result)
    assert max(len(line) for line in text.splitlines()) <= 80, text
    assert "on CPU (no GPU here): this measures gloo between processes, not NCCL" in text


def _every_op(rank, config):
    """A spawned worker: one process group, the real result of every op (saves a torch start-up per op)."""
    group, device, backend = nccl_module.join(rank, config)
    try:
        hosts = group.all_gather_json("host", 64)
        return {op: nccl_module.measure(rank, hosts, device, backend, replace(config, op=op)) for op in OPS}
    finally:
        group.leave()


@pytest.mark.slow
def test_every_collective_is_correct_and_its_numbers_match_on_3_ranks():
    from gpudoctor.bench.launch import run_ranks
    from gpudoctor.bench.nccl import NcclConfig

    config = NcclConfig(min_bytes=1024, max_bytes=4096, iters=2, warmup=1, backend="gloo")
    _, results = run_ranks(_every_op, config, 3)
    assert sorted(results) == sorted(OPS)
    for op, result in results.items():
        check_numbers(result, 3, op, (1024, 4096))
        assert result["launcher"] == "local"


@pytest.mark.slow
def test_corrupted_reduction_is_counted_and_fires_gd701(cli, tmp_path):
    out = tmp_path / "bench.json"
    code, _, err = cli("bench", "nccl", *SMALL, "--nprocs", "2", "--format", "json", "--output", out,
                       faults={CORRUPT: "1"})
    assert code == 1, err
    result = json.loads(out.read_text())
    assert all(row["wrong"] == row["count"] * 2 for row in result["rows"])  # every element, on both ranks
    assert result["summary"]["ok"] is False
    assert [f["rule"] for f in result["findings"]] == ["GD701"]
    report = _replay(cli, tmp_path, result, "GD7")  # a snapshot holding them replays GD701
    assert report["exit_code"] == 1 and [f["rule"] for f in report["findings"]] == ["GD701"]


@pytest.mark.slow
def test_min_busbw_missed_fires_gd702_and_plain_says_so(cli):
    code, out, err = cli("bench", "nccl", *SMALL, "--nprocs", "2", "--min-busbw", "1e6")
    assert code == 1, err
    assert "#wrong" in out and "required (--min-busbw): ≥ 1e+06 GB/s  ✗" in out
    assert "GD702 nccl-bandwidth-low" in out and "GD701" not in out


@pytest.mark.slow
def test_under_torchrun_it_uses_the_env_and_rank0_prints():
    env = {k: v for k, v in os.environ.items() if k not in (
        "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "SLURM_PROCID", CORRUPT, NAN_STEP)}
    env.update(PYTHONPATH=str(ROOT))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                "-m", "gpudoctor", "bench", "nccl", *SMALL, "--format", "json"]
    done = subprocess.run(torchrun, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    result = json.loads(done.stdout)  # exactly one document: only rank 0 prints
    assert result["launcher"] == "torchrun" and result["world_size"] == 2 and result["findings"] == []
    check_numbers(result, 2)


@pytest.mark.slow
def test_a_failing_rank_stops_the_others_with_one_line(cli):
    """Rank 1 fails as its sweep starts while rank 0 waits in its first collective: both end, and the command says
    the first failure in one line."""
    code, out, err = cli("bench", "nccl", "-b", "1M", "-e", "1M", "-n", "100000", "-w", "0", "--nprocs", "2",
                         faults={"GPUDOCTOR_TEST_FAIL_RANK": "1"})
    assert (code, out) == (1, "")
    assert err.strip().splitlines() == [
        "gpudoctor: bench nccl failed: a benchmark worker failed: rank 1: RuntimeError: injected fault"]


@pytest.mark.parametrize("args", [["-b", "lots"], ["-b", "1M", "-e", "1K"], ["--iters", "0"], ["--op", "gather"]])
def test_usage_errors_exit_2(cli, args):
    code, _, err = cli("bench", "nccl", *args)
    assert code == 2 and err.startswith("gpudoctor: error:"), err


TRAIN_SMALL = ["--steps", "4", "--warmup", "1", "--layers", "1", "--hidden", "64", "--heads", "2", "--seq-len", "32"]


@pytest.mark.slow
def test_train_runs_real_steps_and_the_loss_goes_down(cli):
    code, out, err = cli("bench", "train", *TRAIN_SMALL, "--format", "json")
    assert code == 0, err
    result = json.loads(out)
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


def test_a_nan_loss_becomes_gd703_not_a_traceback(cli, monkeypatch):
    from gpudoctor.bench import train

    spec = util.spec_from_file_location("gpudoctor_test_faults", FAULTS / "sitecustomize.py")
    faults = util.module_from_spec(spec)
    spec.loader.exec_module(faults)  # none of its variables is set here: it injects nothing by itself
    monkeypatch.setattr(train, "build_model", train.build_model)  # put back after the test
    faults._nan_at(2)  # `bench train` runs in this process: the fault goes where the sitecustomize would put it
    code, out, err = cli("bench", "train", *TRAIN_SMALL)
    assert code == 1, err
    assert "GD703 train-step-failed" in out and "step 2" in out and "loss is nan" in out
    assert "steps: 1/4 timed" in out


def test_train_usage_errors_exit_2(cli):
    code, _, err = cli("bench", "train", "--hidden", "65", "--heads", "2")
    assert code == 2 and "not divisible" in err
    code, _, err = cli("bench", "train", "--precision", "fp16", "--device", "cpu")
    assert code == 2 and "needs a GPU" in err


@pytest.mark.slow
def test_one_rank_says_busbw_is_zero_by_definition_and_does_not_judge_it(cli, tmp_path):
    code, out, err = cli("bench", "nccl", *SMALL, "--nprocs", "1", "--min-busbw", "5", "--format", "json")
    assert code == 0, err
    result = json.loads(out)
    summary = result["summary"]
    assert summary["busbw_zero_by_definition"] is True and summary["avg_busbw_gbps"] is None
    assert summary["ok"] is None and result["findings"] == []
    plain = render_nccl(result)  # what the plain format prints before the findings (there are none)
    assert "1 rank on 1 node" in plain and "GD702" not in plain
    assert (" busbw: 0 by definition on 1 rank (all_reduce moves no data between ranks); --min-busbw not judged"
            in plain)
    # replayed from a snapshot, GD702 is unknown: the threshold was never measured against
    report = _replay(cli, tmp_path, result, "GD702")
    assert [u["rule"] for u in report["unknown"]] == ["GD702"] and report["findings"] == []
