"""`gpudoctor preflight` for real: three torchrun "nodes" (`--nnodes=3 --node-rank=K`) on this host against one
rendezvous, gloo on CPU, each case's trouble staged for real (tests/preflight_worker.py): all good; a node that never
arrives; a node with another NCCL_PROTO; a rank killed in a collective; a node made slow."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT

WORKER = str(Path(__file__).resolve().parent / "preflight_worker.py")
HOST = socket.gethostname()
NODES = [f"{HOST} (node {k})" for k in range(3)]
ARGS = ["--format", "json", "--quick", "--budget", "45", "--timeout", "25"]

pytestmark = pytest.mark.slow
# where a peer is when a rank dies or freezes inside its first all-reduce: in it too, or (on a busy machine) still
# setting up the fabric's process groups that rank had already left; either is the fabric phase's first collective work
FIRST_FABRIC_STEPS = ("creating the fabric's groups", "all-reduce across the nodes")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "SLURM_", "TORCHELASTIC_", "GROUP_",
                                "NCCL_"))}
    env.update(PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    return env


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_nodes(tmp_path, modes=("plain",) * 3, args=ARGS, env=None, timeout=150.0):
    """Three torchrun agents, node ranks 0–2, one worker each: [(exit status, stdout, stderr, seconds)] per node;
    a node still running when the others ended (a stalled one) or after `timeout` is stopped with its process tree,
    its exit status None."""
    pytest.importorskip("torch.distributed")
    port = _free_port()
    procs = []
    began = time.monotonic()
    for node, mode in enumerate(modes):
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=3", f"--node-rank={node}",
                   "--nproc-per-node=1", "--master-addr=127.0.0.1", f"--master-port={port}", WORKER, mode, *args]
        procs.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                                      env=_clean_env(**((env or {}).get(node) or {})), start_new_session=True))
    results = [None] * 3
    try:
        for node, proc in enumerate(procs):
            if modes[node] in ("stall", "hang"):
                continue  # still there: stopped with its process tree below
            try:
                out, err = proc.communicate(timeout=max(1.0, timeout - (time.monotonic() - began)))
            except subprocess.TimeoutExpired:
                continue  # still running: its status is None, what it wrote is read below
            results[node] = (proc.returncode, out, err, time.monotonic() - began)
    finally:
        for proc in procs:
            _kill_tree(proc)
    for node, proc in enumerate(procs):
        if results[node] is None:
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                pytest.fail(f"node {node}: its output stayed open after its torchrun ended (a process it started "
                            "holds it)")
            results[node] = (None, out, err, time.monotonic() - began)
    return results


def _kill_tree(proc) -> None:
    """A torchrun agent and its workers (which torchrun starts in sessions of their own), if still running; the
    agent is waited for through `proc`, so its exit status is never taken from it."""
    import psutil

    try:
        agent = psutil.Process(proc.pid)
        descendants = agent.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    for item in [agent, *descendants]:
        try:
            item.kill()
        except psutil.NoSuchProcess:
            pass
    proc.wait(timeout=10)
    psutil.wait_procs(descendants, timeout=10)


def report_of(results) -> dict:
    """The one report: exactly one node printed a JSON document (the reporting rank), the others nothing; it is a
    `gpudoctor.preflight/1` document as docs/schemas/preflight.schema.json publishes it."""
    import jsonschema

    printed = [out for _, out, _, _ in results if out.strip()]
    assert len(printed) == 1, [err[-1500:] for _, _, err, _ in results]
    report = json.loads(printed[0])
    jsonschema.validate(report, json.loads((ROOT / "docs" / "schemas" / "preflight.schema.json").read_text()))
    return report


def bad(report) -> dict:
    return {entry["node"]: sorted({reason["rule"] for reason in entry["reasons"]}) for entry in report["bad_nodes"]}


def test_all_good(tmp_path):
    results = run_nodes(tmp_path)
    report = report_of(results)
    assert [code for code, *_ in results] == [0, 0, 0], report
    assert report["ok"] is True and report["bad_nodes"] == [] and report["failure"] is None
    assert [(p["name"], p["status"]) for p in report["phases"]] == [
        ("meet", "ok"), ("agree", "ok"), ("gpus", "ok"), ("fabric", "ok")]
    assert report["device"] == "cpu" and report["backend"] == "gloo" and report["launcher"] == "torchrun"
    assert [node["node"] for node in report["nodes"]] == NODES
    assert [(gpu["node"], gpu["rank"]) for gpu in report["gpus"]] == list(zip(NODES, range(3)))
    assert all(gpu["gemm_tflops"] > 0 and gpu["copy_gbps"] > 0 for gpu in report["gpus"])
    cross = report["fabric"]["cross"]
    assert cross["nodes"] == NODES and cross["wrong"] == 0 and cross["busbw_gbps"] > 0
    assert sorted(tuple(pair["nodes"]) for pair in report["fabric"]["pairs"]) == sorted(
        [(NODES[0], NODES[1]), (NODES[1], NODES[2]), (NODES[2], NODES[0])])
    assert report["seconds"] <= 45 and sum(p["seconds"] for p in report["phases"]) <= report["seconds"]
    rules = {f["rule"] for f in report["findings"]}
    assert not rules & {"GD806", "GD807", "GD808", "GD809"}
    assert report["limits"] == {"straggler": {"below_median": 0.5}, "gemm": {"datasheet_fraction": 0.5},
                                "fabric": {"below_median": 0.5}}  # rules/preflight.toml's, without a site policy


def test_a_node_that_never_arrives_is_named_within_the_deadline(tmp_path):
    """torchrun starts no worker before every agent has joined: node 2's worker is started, and stalls."""
    results = run_nodes(tmp_path, modes=("plain", "plain", "stall"), args=ARGS[:-1] + ["8"])
    report = report_of(results)
    assert [code for code, *_ in results[:2]] == [1, 1]
    assert bad(report) == {"node rank 2": ["GD806"]}
    assert report["phases"][0]["status"] == "bad" and "2 of 3 ranks arrived within 8 s" in report["phases"][0]["note"]
    assert [p["status"] for p in report["phases"][1:]] == ["skipped"] * 3
    assert max(seconds for _, _, _, seconds in results[:2]) < 90


def test_a_node_with_another_nccl_proto_is_named_before_any_collective(tmp_path):
    results = run_nodes(tmp_path, env={1: {"NCCL_PROTO": "LL128"}})
    report = report_of(results)
    assert [code for code, *_ in results] == [1, 1, 1]
    assert bad(report) == {NODES[1]: ["GD803"]}
    assert [(p["name"], p["status"]) for p in report["phases"]] == [
        ("meet", "ok"), ("agree", "bad"), ("gpus", "skipped"), ("fabric", "skipped")]
    assert report["gpus"] == [] and report["fabric"] is None


def test_a_rank_killed_in_a_collective_names_its_node_and_the_others_end(tmp_path):
    results = run_nodes(tmp_path, modes=("plain", "plain", "die"))
    report = report_of(results)
    assert [code for code, *_ in results] == [1, 1, 1]
    assert bad(report) == {NODES[2]: ["GD808"]}
    assert report["failure"]["unfinished"] == [{"rank": 2, "node": NODES[2]}]
    assert report["failure"]["step"] in FIRST_FABRIC_STEPS
    assert report["phases"][-1]["name"] == "fabric" and report["phases"][-1]["status"] == "failed"
    assert report["seconds"] < 45


def test_a_slow_node_is_named_as_the_straggler(tmp_path):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs: one starved, one for the others")
    results = run_nodes(tmp_path, modes=("plain", "slow", "plain"))
    report = report_of(results)
    assert [code for code, *_ in results] == [1, 1, 1]
    assert bad(report) == {NODES[1]: ["GD807"]}
    # measured far below the others, or still measuring when the phase's time ran out (a busier machine)
    reasons = [r for entry in report["bad_nodes"] for r in entry["reasons"]]
    assert reasons and all(r["gpus"][0]["rank"] == 1 for r in reasons)
    assert all(r["value"] < 0.5 * r["median"] if r["metric"] != "unfinished" else r["value"] > 0 for r in reasons)


def test_a_rank_hung_in_a_collective_is_named_when_its_deadline_passes(tmp_path):
    """A rank frozen in the all-reduce (SIGSTOP: its connections stay open, nothing comes): its peers wait until
    the fabric phase's deadline, not gloo's, then name it; everything within the budget."""
    results = run_nodes(tmp_path, modes=("plain", "plain", "hang"),
                        args=["--format", "json", "--quick", "--budget", "30", "--timeout", "20"])
    report = report_of(results)
    assert [code for code, *_ in results[:2]] == [1, 1]
    assert bad(report) == {NODES[2]: ["GD808"]}
    assert report["failure"]["unfinished"] == [{"rank": 2, "node": NODES[2]}]
    assert report["failure"]["step"] in FIRST_FABRIC_STEPS
    assert "not finished within" in report["failure"]["error"], report["failure"]  # preflight's deadline, not gloo's
    assert report["phases"][-1]["name"] == "fabric" and report["phases"][-1]["status"] == "failed"
    assert report["seconds"] < 30
