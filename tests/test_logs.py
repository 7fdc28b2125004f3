"""Failed-run logs: `check --from LOG` on logs written in the real formats (fixtures/logs/), the real ones in
../shared/corpus/logs/ with their known causes, streaming (chunks, stdin, ~100 MB with bounded memory), several
logs grouped by host, and the reader's properties under fuzzing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_in_process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.catalog import load_catalog
from gpudoctor.ingest.logs import LogScanner

ROOT = Path(__file__).resolve().parents[1]
LOGS = ROOT / "fixtures" / "logs"
CORPUS_LOGS = ROOT.parent / "shared" / "corpus" / "logs"
REQUIRE_CORPUS = os.environ.get("GPUDOCTOR_REQUIRE_CORPUS") == "1"
needs_corpus = pytest.mark.skipif(not (CORPUS_LOGS / "labels.json").is_file() and not REQUIRE_CORPUS,
                                  reason="../shared/corpus/logs is not beside the checkout")
TAG_RULE = {"nccl-socket-fallback": "GD420", "ib-plugin-missing": "GD421", "nccl-timeout": "GD424",
            "driver-too-old": "GD101", "shm-too-small": "GD503", "nvcc-torch-mismatch": "GD102"}


def gpudoctor(*args, stdin=None):
    """The CLI's exit code, stdout and stderr (bytes). In this process, unless `stdin` is given: then a real pipe
    feeds a real process, which is what those tests are about."""
    if stdin is None:
        done = cli_in_process(*args)
        return subprocess.CompletedProcess(args, done.returncode, done.stdout.encode(), done.stderr.encode())
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "gpudoctor", *map(str, args)], input=stdin, capture_output=True,
                          timeout=120, env=env, cwd=ROOT)


def findings(*paths, extra=()):
    args = ["check", "--format", "json", *extra]
    for path in paths:
        args += ["--from", path]
    proc = gpudoctor(*args)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    report = json.loads(proc.stdout)
    return {(f["rule"], f["severity"]) for f in report["findings"]}, report


@pytest.mark.parametrize("name, expected", [
    ("nccl_efa_plugin_failed.log", {("GD420", "error"), ("GD421", "error")}),
    ("torchrun_watchdog_timeout.log", {("GD424", "error")}),
    ("dmesg_xid.txt", {("GD507", "error"), ("GD507", "warning")}),
    ("cuda_oom_traceback.log", {("GD508", "error")}),
    ("torchrun_sigkill.log", {("GD509", "warning")}),           # SIGKILL alone: not proof of OOM
    ("journal_oom_killer.txt", {("GD509", "error")}),           # the OOM killer's own line
    ("slurm_oom_kill.log", {("GD509", "error")}),               # slurmstepd's oom-kill event, srun's task
    ("k8s_describe_oomkilled.txt", {("GD509", "error")}),       # kubectl describe: Reason: OOMKilled
    ("nccl_duplicate_gpu.log", {("GD425", "error")}),
    ("spawn_bootstrap.log", {("GD601", "error")}),
    ("dataloader_bus_error.log", {("GD503", "error")}),
    ("no_kernel_image.log", {("GD104", "error")}),
])
def test_log_fixtures_name_their_cause(name, expected):
    fired, report = findings(LOGS / name)
    assert fired == expected, report["findings"]
    for finding in report["findings"]:
        assert finding["evidence"].get("log") or finding["evidence"].get("hosts"), finding  # the line, not a guess


@pytest.mark.parametrize("name", ["nccl_ib_healthy_2nodes.log", "nccl_single_node_socket.log"])
def test_healthy_logs_give_no_error_or_warning(name):
    """IB used as configured across two nodes; one node on loopback sockets with no IB: routine INFO lines."""
    fired, report = findings(LOGS / name)
    assert {severity for _, severity in fired} <= {"info"}, report["findings"]
    assert report["summary"]["error"] == report["summary"]["warning"] == 0


def test_evidence_names_the_line_and_the_reason():
    _, report = findings(LOGS / "nccl_efa_plugin_failed.log")
    (fallback,) = [f for f in report["findings"] if f["rule"] == "GD420"]
    assert "FI_PROVIDER set" in fallback["message"] and "the net plugin failed" in fallback["message"]
    assert "Unable to find a protocol that worked" in fallback["message"]
    (bootstrap,) = [f for f in findings(LOGS / "spawn_bootstrap.log")[1]["findings"]]
    assert bootstrap["evidence"]["script"] == r"C:\Users\me\project\train.py"
    assert bootstrap["evidence"]["script_line"] == 57
    (xid79,) = [f for f in findings(LOGS / "dmesg_xid.txt")[1]["findings"] if f["evidence"]["xid"] == 79]
    assert xid79["severity"] == "error" and xid79["evidence"]["log"].endswith("dmesg_xid.txt line 6")
    (oom,) = findings(LOGS / "cuda_oom_traceback.log")[1]["findings"]
    assert "tried to allocate 3.91 GiB, GPU 0, 79.14 GiB total, 2.17 GiB free" in oom["message"]


def test_several_logs_are_grouped_by_host_not_by_file(tmp_path):
    """Two ranks' logs: versions differ between the hosts (GD422), one host bootstraps over docker0 (GD423).
    The same host's lines split over two files stay one host."""
    fired, report = findings(LOGS / "rank0_node-a.log", LOGS / "rank1_node-b.log")
    assert fired == {("GD422", "error"), ("GD423", "warning")}
    assert "2.18.1 on node-a; 2.21.5 on node-b" in [f for f in report["findings"] if f["rule"] == "GD422"][0]["message"]
    lines = (LOGS / "rank0_node-a.log").read_text().splitlines(keepends=True)
    first, second = tmp_path / "part1.log", tmp_path / "part2.log"
    first.write_text("".join(lines[:2]))
    second.write_text("".join(lines[2:]))
    fired, report = findings(first, second)
    assert fired == set()
    snap = json.loads(gpudoctor("snapshot", "--from", first, "--from", second).stdout)
    assert list(snap["facts"]["logs"]["hosts"]) == ["node-a"]


def test_single_host_version_without_prefix_is_that_hosts(tmp_path):
    """NCCL prints 'NCCL version' without a prefix on rank 0: it belongs to the host printing before it."""
    snap = json.loads(gpudoctor("snapshot", "--from", LOGS / "nccl_single_node_socket.log").stdout)
    assert snap["facts"]["logs"]["hosts"]["workstation"]["nccl_version"] == "2.18.1"


@pytest.mark.slow
def test_stdin_and_snapshot_replay(tmp_path):
    data = (LOGS / "nccl_efa_plugin_failed.log").read_bytes()
    proc = gpudoctor("check", "--from", "-", "--format", "json", stdin=data)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert {f["rule"] for f in report["findings"]} == {"GD420", "GD421"}
    assert report["findings"][0]["evidence"]["log"].startswith("<stdin> line ")
    snap = tmp_path / "run.json"
    assert gpudoctor("snapshot", "--from", "-", "-o", snap, stdin=data).returncode == 0
    replay = json.loads(gpudoctor("check", "--snapshot", snap, "--format", "json").stdout)
    assert [f["message"] for f in replay["findings"]] == [f["message"] for f in report["findings"]]


def test_log_beside_a_report_merges(tmp_path):
    """A log and a pasted nvidia-smi: machine facts and log evidence in one report."""
    smi = ROOT / "fixtures" / "reports" / "nvidia_smi_470_table.txt"
    fired, report = findings(LOGS / "dmesg_xid.txt", smi)
    assert ("GD507", "error") in fired and ("GD502", "warning") in fired
    snap = json.loads(gpudoctor("snapshot", "--from", LOGS / "dmesg_xid.txt", "--from", smi).stdout)
    assert snap["source"]["formats"] == ["nvidia_smi", "log"] and snap["facts"]["nvml"]["driver_version"]


@needs_corpus
@pytest.mark.parametrize("label", json.loads((CORPUS_LOGS / "labels.json").read_text())
                         if (CORPUS_LOGS / "labels.json").is_file() else [], ids=lambda label: label["id"])
def test_corpus_logs_name_their_known_cause(label):
    fired, report = findings(CORPUS_LOGS / label["file"])
    expected = {TAG_RULE[tag] for tag in label["expected"] if tag in TAG_RULE}
    assert expected and expected <= {rule for rule, _ in fired}, report["findings"]
    errors = {rule for rule, severity in fired if severity == "error"}
    assert errors <= expected, f"fired more than the thread's cause: {errors - expected}"


@pytest.mark.slow
def test_a_large_log_streams_with_bounded_memory(tmp_path):
    """~100 MB of training output with NCCL lines spread through it: read in chunks, memory stays bounded,
    and a failure near the end is still found."""
    big = tmp_path / "big.log"
    block = ("".join(f"{{'loss': {2 + i / 1000:.4f}, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.{i:04d}}}\n"
                     for i in range(2000))
             + "gpu-a01:40211:40367 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n")
    with open(big, "w") as handle:
        handle.write((LOGS / "nccl_ib_healthy_2nodes.log").read_text())
        while handle.tell() < 100 * 2 ** 20:
            handle.write(block)
        handle.write("[Tue Mar  4 05:02:44 2025] NVRM: Xid (PCI:0000:86:00): 79, pid='<unknown>', name=<unknown>, "
                     "GPU has fallen off the bus.\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # The CLI in a process of its own that reports its own peak memory at exit: VmHWM of its address space
    # (ru_maxrss would carry over the forking pytest's size through exec).
    run_and_measure = ("import atexit, runpy, sys\n"
                       "def peak():\n"
                       "    kib = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
                       "    sys.stderr.write('maxrss=%s\\n' % kib)\n"
                       "atexit.register(peak)\n"
                       "sys.argv = ['gpudoctor', 'check', '--from', sys.argv[1], '--format', 'json']\n"
                       "runpy.run_module('gpudoctor', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", run_and_measure, str(big)], capture_output=True, env=env, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 1, proc.stderr.decode()
    report = json.loads(proc.stdout)
    (xid,) = [f for f in report["findings"] if f["rule"] == "GD507"]
    assert xid["evidence"]["xid"] == 79
    assert report["summary"]["warning"] == 0  # the healthy part stays healthy
    # The 100 MB file is never held in memory (as text and lines it would take several times its size).
    peak_kib = int(proc.stderr.decode().rsplit("maxrss=", 1)[1].split()[0])
    assert peak_kib < 200 * 1024, peak_kib


# --- the reader itself --------------------------------------------------------------------------------------

def scan(text: str, cuts=()) -> dict:
    scanner = LogScanner()
    line, start = 1, 0
    for cut in list(cuts) + [len(text)]:
        piece = text[start:cut]
        if piece:
            line += scanner.feed("run.log", piece.encode("utf-8"), line)
        start = cut
    return scanner.result()[0]


def test_line_numbers_survive_chunking():
    text = "".join(f"step {i}\n" for i in range(1000)) + "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n"
    (event,) = scan(text)["logs"]["events"]
    assert event["where"] == "run.log line 1001" and event["xid"] == 48


LOG_LINES = [path.read_text(errors="replace").splitlines(keepends=True) for path in sorted(LOGS.iterdir())]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, len(LOG_LINES) - 1), st.lists(st.integers(0, 400), max_size=5))
def test_chunk_boundaries_do_not_change_what_is_read(which, cut_lines):
    """Any split of a log at line boundaries gives the same facts as reading it whole."""
    lines = LOG_LINES[which]
    offsets = sorted({sum(len(x) for x in lines[:min(n, len(lines))]) for n in cut_lines})
    assert scan("".join(lines), offsets) == scan("".join(lines))


PIECES = list("NCCL INFO WARN Xid rror:[]()0123456789.-_/\n\r\x1b\t ab=\u00e9") + [
    "NCCL INFO ", "NCCL WARN ", "host:1:2 [0] ", "Timeout(ms)=", "exitcode", "NVRM: Xid (PCI:0000:3b:00): ",
    "Using network ", "NCCL version ", "CUDA out of memory. Tried to allocate ", "Killed process ", "<module>"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=600).map("".join))
def test_reader_never_crashes_on_noise(text):
    facts = scan(text)
    if facts:
        assert isinstance(facts["logs"]["events"], list)
        json.dumps(facts)


def test_random_bytes_are_not_a_log(tmp_path):
    path = tmp_path / "noise.bin"
    path.write_bytes(random.Random(7).randbytes(200_000))
    proc = gpudoctor("check", "--from", path)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1


def test_an_echoed_nccl_value_is_judged(tmp_path):
    """NCCL echoes what it read from the environment: a value it rejects is GD402, with the log line."""
    log = tmp_path / "rank0.log"
    log.write_text("node-a:100:100 [0] NCCL INFO NCCL_PROTO set by environment to simple2\n"
                   "node-a:100:100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n")
    fired, report = findings(log)
    assert fired == {("GD402", "error")}
    assert report["findings"][0]["evidence"] == {"log": f"{log} line 1", "variable": "NCCL_PROTO",
                                                 "value": "simple2",
                                                 "problem": report["findings"][0]["evidence"]["problem"]}


def test_a_recorded_node_with_its_runs_logs():
    """`--snapshot node.json --from rank0.log --from rank1.log`: the node has InfiniBand, the two-node run used
    sockets (GD420 says why it counts), and the snapshot's own facts still judge the machine."""
    machine = ROOT / "fixtures" / "machines" / "h100x8-healthy.json"
    proc = gpudoctor("check", "--snapshot", machine, "--from", LOGS / "rank0_node-a.log", "--from",
                     LOGS / "rank1_node-b.log", "--format", "json")
    assert proc.returncode == 1, proc.stderr.decode()
    report = json.loads(proc.stdout)
    (fallback,) = [f for f in report["findings"] if f["rule"] == "GD420"]
    assert "8 InfiniBand/RDMA device(s) on the host" in fallback["message"]
    assert report["source"]["kind"] == "snapshot" and len(report["source"]["paths"]) == 3
    alone = json.loads(gpudoctor("check", "--snapshot", machine, "--format", "json").stdout)
    assert alone["summary"]["error"] == 0  # the machine alone is healthy: the error comes from the logs


def test_every_event_kind_is_documented():
    """docs/snapshot.md lists every event kind the reader's code writes, and none that neither it nor a message of
    the atlas (docs/messages.md) writes."""
    import re

    from gpudoctor.ingest.atlas import messages

    source = "".join(path.read_text() for path in (ROOT / "gpudoctor" / "ingest").glob("log*.py"))
    written = set(re.findall(r'\bevent\(name, "(\w+)"', source))
    doc = (ROOT / "docs" / "snapshot.md").read_text().split("`events` kinds:", 1)[1].split("— at most", 1)[0]
    documented = set(re.findall(r"`(\w+)`", doc))
    assert written <= documented, written - documented
    assert documented <= written | {message.event for message in messages()}, documented - written


def test_a_line_longer_than_a_chunk_is_cut_not_accumulated(tmp_path):
    """A progress bar redrawn with \\r and never a newline: read in bounded pieces, the next line still found."""
    from gpudoctor.ingest.source import CHUNK_BYTES, snapshot_from_reports

    log = tmp_path / "bars.log"
    with open(log, "wb") as handle:
        handle.write(b"\r 41%|####      | 1230/3000" * (3 * CHUNK_BYTES // 26))
        handle.write(b"\nNVRM: Xid (PCI:0000:3b:00): 48, pid=1, DBE\n")
    facts = snapshot_from_reports([str(log)]).facts
    (event,) = facts["logs"]["events"]
    assert event["xid"] == 48 and event["where"].endswith(" line 2")


# ---- snapshot --from LOG for fleet: a log naming several hosts is several nodes ----------------------------------

def fleet_json(*snapshots):
    proc = gpudoctor("fleet", *snapshots, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return proc.returncode, json.loads(proc.stdout)


def snapshot_of(tmp_path, name, *logs):
    path = tmp_path / name
    args = ["snapshot", "-o", path]
    for log in logs:
        args += ["--from", log]
    proc = gpudoctor(*args)
    assert proc.returncode == 0, proc.stderr.decode()
    return path


def test_a_multi_host_log_snapshot_is_one_fleet_node_per_host(tmp_path):
    """`srun --label` output of a two-node job: each host is a node; the NCCL versions they printed are compared
    across nodes (GD802), each node's timeout stays on its node (the srun task number places the prefix-less
    watchdog line), and the same snapshot replayed as one run still says GD422."""
    snap = snapshot_of(tmp_path, "run.json", LOGS / "srun_two_nodes_nccl_mismatch.log")
    code, doc = fleet_json(snap)
    assert code == 1
    assert [node["node"] for node in doc["nodes"]] == ["gpu-b01", "gpu-b02"]
    [stack] = [f for f in doc["findings"] if f["rule"] == "GD802"]
    assert stack["nodes"] == {"2.18.1": ["gpu-b02"], "2.20.5": ["gpu-b01"]}
    assert stack["message"].startswith("NCCL (as the nodes' logs print it) differs between nodes")
    for node, rank in zip(doc["nodes"], (0, 8)):
        [timeout] = node["findings"]
        assert timeout["rule"] == "GD424" and timeout["evidence"]["ranks"] == [rank]
    fired, _ = findings(LOGS / "srun_two_nodes_nccl_mismatch.log")
    assert ("GD422", "error") in fired
    replay = json.loads(gpudoctor("check", "--snapshot", snap, "--format", "json").stdout)
    assert "GD422" in {f["rule"] for f in replay["findings"]}


def test_a_healthy_two_node_log_gives_no_cross_node_error(tmp_path):
    """IB on both hosts, the version printed by one rank only: nothing to compare, nothing fails; what no log
    could tell (drivers, GPUs, the environment) is unknown, not passed."""
    code, doc = fleet_json(snapshot_of(tmp_path, "run.json", LOGS / "nccl_ib_healthy_2nodes.log"))
    assert code == 0 and [node["node"] for node in doc["nodes"]] == ["gpu-a01", "gpu-a02"]
    assert doc["findings"] == [] and doc["summary"]["error"] == doc["summary"]["warning"] == 0
    assert doc["summary"]["unknown"] == 4 and doc["summary"]["passed"] == 1  # GD805 compared the rules


def test_one_snapshot_per_rank_log_is_named_by_its_host(tmp_path):
    a = snapshot_of(tmp_path, "a.json", LOGS / "rank0_node-a.log")
    b = snapshot_of(tmp_path, "b.json", LOGS / "rank1_node-b.log")
    code, doc = fleet_json(a, b)
    assert code == 1 and [node["node"] for node in doc["nodes"]] == ["node-a", "node-b"]
    assert [f["nodes"] for f in doc["findings"] if f["rule"] == "GD802"] == [{"2.18.1": ["node-a"],
                                                                               "2.21.5": ["node-b"]}]


def test_the_host_that_fell_back_to_sockets_is_the_odd_one_out(tmp_path):
    """One host used IB, the other found no IB device and used sockets: GD420 fires on that node only (it still
    knows the run spanned two hosts), and GD805 names it."""
    log = tmp_path / "run.log"
    log.write_text(
        "gpu-c01:100:100 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
        "gpu-c01:100:140 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB eth0:10.0.0.1<0>\n"
        "gpu-c01:100:140 [0] NCCL INFO Using network IB\n"
        "gpu-c02:200:200 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0\n"
        "gpu-c02:200:240 [0] NCCL INFO NET/IB : No device found.\n"
        "gpu-c02:200:240 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n"
        "gpu-c02:200:240 [0] NCCL INFO Using network Socket\n")
    code, doc = fleet_json(snapshot_of(tmp_path, "run.json", log))
    assert code == 1
    by_node = {node["node"]: [f["rule"] for f in node["findings"]] for node in doc["nodes"]}
    assert by_node == {"gpu-c01": [], "gpu-c02": ["GD420"]}
    [odd] = [f for f in doc["findings"] if f["rule"] == "GD805"]
    assert odd["nodes"] == {"fails": ["gpu-c02"], "passes": ["gpu-c01"]}


def test_lines_no_host_claims_are_a_node_of_their_own_never_compared(tmp_path):
    """An interleaved log without `srun --label`: the traceback names no host, so it is reported under
    `FILE (no host)` and kept out of the cross-node comparison (no host is said to have passed it)."""
    log = tmp_path / "run.log"
    log.write_text(
        "gpu-d01:100:100 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.1<0>\n"
        "gpu-d02:200:200 [0] NCCL INFO Bootstrap : Using ib0:10.1.0.2<0>\n"
        + (LOGS / "cuda_oom_traceback.log").read_text())
    code, doc = fleet_json(snapshot_of(tmp_path, "run.json", log))
    assert code == 1
    assert [node["node"] for node in doc["nodes"]] == ["gpu-d01", "gpu-d02", "run.json (no host)"]
    assert [f["rule"] for f in doc["nodes"][2]["findings"]] == ["GD508"]
    assert not [f for f in doc["findings"] if f["rule"] == "GD805"]


def test_events_are_placed_on_the_host_their_lines_come_from():
    """The NCCL prefix, the `srun --label` task whose NCCL lines name a host, the kernel log's hostname, a file
    whose NCCL lines name one host; nothing else is guessed."""
    facts = scan("0: gpu-e01:1:1 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
                 "1: gpu-e02:2:2 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>\n"
                 "1: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
                 "May 21 15:43:02 gpu-e03 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, "
                 "GPU has fallen off the bus.\n"
                 "2: exitcode  : -9 (pid: 1234)\n")
    hosts = {event["kind"]: event.get("host") for event in facts["logs"]["events"]}
    assert hosts == {"cuda_oom": "gpu-e02", "xid": "gpu-e03", "sigkill": None}
    single = scan("gpu-f01:1:1 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.1<0>\n"
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert single["logs"]["events"][0]["host"] == "gpu-f01"


def test_the_documented_fleet_snapshot_is_what_snapshot_from_makes(tmp_path):
    """docs/logs.md shows `gpudoctor fleet` on a recorded snapshot of a log: it holds what the reader makes of that
    log today."""
    recorded = json.loads((ROOT / "fixtures" / "fleet" / "srun-two-nodes-logs.json").read_text())
    fresh = json.loads(snapshot_of(tmp_path, "run.json", "fixtures/logs/srun_two_nodes_nccl_mismatch.log").read_text())
    assert recorded["facts"] == fresh["facts"]


# ---- GD508 with --model: the estimate's terms beside the sizes torch printed -------------------------------------

def oom_with(*model_args):
    _, report = findings(LOGS / "cuda_oom_traceback.log", extra=model_args)
    (oom,) = [f for f in report["findings"] if f["rule"] == "GD508"]
    return oom


@pytest.mark.parametrize("model_args, largest, case", [
    (("--model", "7B"), "the optimizer states (78.2 GiB)", "optimizer"),
    (("--model", "70B", "--zero-stage", "2", "--world-size", "64"), "the weights (130.4 GiB)", "weights"),
    (("--model", "fixtures/models/qwen2.5-0.5b.config.json", "--seq-len", "8192", "--micro-batch", "8"),
     "the activations (124.5 GiB)", "activations"),
])
def test_an_oom_with_model_names_the_term_to_cut(model_args, largest, case):
    from gpudoctor.catalog import load_catalog

    oom = oom_with(*model_args)
    assert "tried to allocate 3.91 GiB, GPU 0, 79.14 GiB total, 2.17 GiB free" in oom["message"]
    assert "weights " in oom["message"] and " + gradients " in oom["message"] and " + optimizer " in oom["message"]
    assert "more than the 79.14 GiB torch reported" in oom["message"]
    assert oom["message"].endswith(f"the largest term is {largest}")
    rule = next(r for r in load_catalog() if r.id == "GD508")
    size = largest.split("(")[1].rstrip(")")
    assert oom["fix"]["summary"] == rule.fix_text(case, {"size": size})
    assert set(oom["evidence"]["estimate"]) == {"weights", "gradients", "optimizer", "activations", "overhead"}


def test_an_oom_the_estimate_fits_points_at_what_it_does_not_model():
    from gpudoctor.catalog import load_catalog

    oom = oom_with("--model", "fixtures/models/qwen2.5-0.5b.config.json")
    assert "= 12.3 GiB per GPU, within the 79.14 GiB torch reported" in oom["message"]
    rule = next(r for r in load_catalog() if r.id == "GD508")
    assert oom["fix"]["summary"] == rule.fix_text("fits")


def test_an_oom_without_model_shows_no_estimate():
    from gpudoctor.catalog import load_catalog

    oom = oom_with()
    assert "estimate" not in oom["message"] and "estimate" not in oom["evidence"]
    assert oom["fix"]["summary"] == next(r for r in load_catalog() if r.id == "GD508").fix_text()


# ---- GD509: the memory evidence a log can hold, each in its real wording -----------------------------------------

@pytest.mark.parametrize("line, source, fields", [
    ("[ 7063.247407] Memory cgroup out of memory: Killed process 63214 (python) total-vm:3149468kB, "
     "anon-rss:164992kB, file-rss:52176kB, shmem-rss:92kB, UID:0 pgtables:1372kB oom_score_adj:986",
     "cgroup", {"pid": 63214, "process": "python", "rss_kib": 164992}),
    ("Aug 16 20:29:54 gpu-a3 kernel: Killed process 42453 (python), UID 0, total-vm:7296kB, anon-rss:96kB, "
     "file-rss:164kB, shmem-rss:0kB", "kernel", {"pid": 42453, "process": "python", "rss_kib": 96, "host": "gpu-a3"}),
    ("[Thu Dec  7 00:05:15 2017] Memory cgroup out of memory: Kill process 24572 (python) score 0 or sacrifice child",
     "cgroup", {"process": "python"}),
    ("May 21 15:43:02 worker-3 kernel: python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), "
     "order=0, oom_score_adj=0", "kernel", {"process": "python3", "host": "worker-3"}),
    ("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/kubepods/pod1,"
     "task_memcg=/kubepods/pod1/c1,task=python,pid=4242,uid=0", "cgroup",
     {"constraint": "CONSTRAINT_MEMCG", "process": "python", "pid": 4242}),
    ("oom_kill 3", "cgroup", {"count": 3}),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have been "
     "killed by the cgroup out-of-memory handler.", "slurm", {"count": 1, "step": "3495064.0"}),
    ("slurmstepd: error: Detected 2 oom_kill events in StepId=11300781.0. Some of the step tasks have been OOM Killed.",
     "slurm", {"count": 2, "step": "11300781.0"}),
    ("srun: error: sdumont6156: task 0: Out Of Memory", "slurm", {"host": "sdumont6156", "task": "0"}),
    ("      Reason:       OOMKilled", "kubernetes", {}),
    ("llama-ft-worker-0   0/1     OOMKilled   4 (57s ago)   2m40s", "kubernetes", {}),
    ('            "OOMKilled": true,', "docker", {}),
])
def test_memory_evidence_is_read_in_its_real_wording(line, source, fields):
    (event,) = scan(line + "\n")["logs"]["events"]
    assert event["kind"] == "oom_killer" and event["source"] == source
    assert {key: event.get(key) for key in fields} == fields


@pytest.mark.parametrize("text", [
    '            "OOMKilled": false,\n',                                     # docker inspect of a healthy container
    "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\n",  # 137 is not OOM
    "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n",                           # memory.events with nothing killed
    "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name\n",
    "Loading bigscience/bloom-560m: the bloom tokenizer\n",
    "set oom_score_adj to 0 for the trainer; to avoid being OOM-killed use --mem\n",
])
def test_words_near_memory_are_not_evidence(text):
    facts = scan(text)
    assert not [e for e in (facts.get("logs") or {}).get("events", []) if e["kind"] == "oom_killer"]


def test_slurm_oom_names_the_step_and_a_bare_kill_still_lists_causes(tmp_path):
    fired, report = findings(LOGS / "slurm_oom_kill.log")
    (finding,) = report["findings"]
    assert finding["message"].startswith("SLURM detected 1 oom-kill event(s) in step 4471823.0")
    assert finding["evidence"]["source"] == "slurm"
    log = tmp_path / "run.log"
    log.write_text("E0502 11:05:03.391000 140237 torch/distributed/elastic/multiprocessing/api.py:869] failed "
                   "(exitcode: -9) local_rank: 0 (pid: 2215) of binary: /usr/bin/python3\n"
                   "    Last State:     Terminated\n      Reason:       Error\n      Exit Code:    137\n")
    fired, report = findings(log)
    assert fired == {("GD509", "warning")} and "does not say by whom" in report["findings"][0]["message"]


def test_every_xid_names_a_fix_case_of_gd507():
    """rules/xid.toml names, per Xid, the case of GD507's fix text (said once in the catalog); every case but the
    one for an unknown Xid serves some Xid, and an unknown Xid gets that one."""
    from gpudoctor.catalog import load_catalog
    from gpudoctor.checks.run_failures import xid_catalog

    rule = next(r for r in load_catalog() if r.id == "GD507")
    used = {row["fix"] for row in xid_catalog().values()}
    assert used | {"unknown_xid"} == set(rule.docs["fixes"])
    _, report = findings(LOGS / "dmesg_xid.txt")
    fixes = {f["evidence"]["xid"]: f["fix"]["summary"] for f in report["findings"]}
    assert fixes[79] == rule.fix_text("bus") and fixes[13] == rule.fix_text("application")
    facts = scan("NVRM: Xid (PCI:0000:3b:00): 999, pid=1, something new\n")
    from gpudoctor.facts import Facts

    (unknown,) = list(rule.check(Facts(facts), rule))
    assert unknown.fix.summary == rule.fix_text("unknown_xid") and unknown.severity.name == "WARNING"


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: (st.lists(inner, max_size=3)
                                    | st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                     max_leaves=12)


@pytest.mark.slow
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hosts=st.dictionaries(st.sampled_from(["a", "b", "file x.log", "c"]), _JSON, max_size=4),
       events=_JSON, env=_JSON, files=_JSON)
def test_a_hand_made_log_snapshot_splits_without_crashing(hosts, events, env, files):
    """`gpudoctor fleet` reads snapshot files (user input): whatever a `logs` group holds, splitting it by host
    neither crashes nor invents a host."""
    from gpudoctor.fleet import log_nodes
    from gpudoctor.snapshot import Snapshot

    logs = {"hosts": hosts, "events": events, "nccl_env": env, "files": files, "lines": 3}
    nodes = log_nodes("run.json", Snapshot(facts={"logs": logs}))
    named = [h for h in hosts if not h.startswith("file ")]
    names = [name for name, _ in nodes]
    assert names == (named + ["run.json (no host)"] if len(named) >= 2 else ["run.json"]) or \
        names == named


def test_argparse_refusing_the_launchers_local_rank_is_gd609(tmp_path, run_cli):
    """torch >= 2.0's torch.distributed.launch passes --local-rank; a script that takes only --local_rank stops in
    every rank (the message printed once per rank is one finding)."""
    log = tmp_path / "run.log"
    log.write_text("usage: train.py [-h] [--local_rank LOCAL_RANK]\n"
                   "train.py: error: unrecognized arguments: --local-rank=0\n"
                   "usage: train.py [-h] [--local_rank LOCAL_RANK]\n"
                   "train.py: error: unrecognized arguments: --local-rank=1\n"
                   "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 2) local_rank: 0\n")
    code, out, _ = run_cli("check", "--from", log, "--select", "GD609", "--format", "json")
    (finding,) = json.loads(out)["findings"]
    assert code == 1 and finding["evidence"]["passes"] == "--local-rank" and finding["evidence"]["script"] == "train.py"
    assert "run.log line 2" in finding["message"]
    log.write_text("Map: 100%|##########| 10/10 [00:00<00:00, 900.00 examples/s]\n"  # a log gpudoctor reads
                   "train.py: error: unrecognized arguments: --epochs=3\n")  # another argument: not GD609
    code, out, _ = run_cli("check", "--from", log, "--select", "GD609", "--format", "json")
    assert json.loads(out)["findings"] == []


# ---- wordings real logs use across NCCL, torch and shell versions -------------------------------------------------

def torch_nccl_error(error: str) -> str:
    """torch's line for an NCCL call that failed (torch 2.1-2.4 wording)."""
    return ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
            f"1691, {error} (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3\n")


@pytest.mark.parametrize("warn, peer, reason", [
    ("include/socket.h:409 NCCL WARN Net : Connect to 10.20.1.8<39117> failed : No route to host",
     "10.20.1.8<39117>", "No route to host"),                                      # NCCL 2.12-2.17
    ("misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.20.1.8<39117> failed : Connection refused",
     "10.20.1.8<39117>", "Connection refused"),                                    # 2.18
    ("misc/socket.cc:538 NCCL WARN socketPollConnect: Connect to 10.20.1.8<39117> returned 113(No route to host) "
     "errno 115(Operation now in progress)", "10.20.1.8<39117>", "No route to host"),  # 2.19+
    ("include/socket.h:360 NCCL WARN Call to connect timeout : Connection refused", None, "Connection refused"),  # 2.3
])
def test_a_socket_nccl_could_not_open_is_gd425_once(tmp_path, warn, peer, reason):
    """NCCL's connect failure names the peer and the reason; torch's 'unhandled system error' after it is the same
    failure, not a second finding."""
    log = tmp_path / "rank0.log"
    log.write_text("gpu-b07:4410:4410 [0] NCCL INFO Bootstrap : Using ens5:10.20.1.7<0>\n"
                   "gpu-b07:4410:4410 [0] NCCL INFO Using network Socket\n\n"
                   f"gpu-b07:4410:4502 [0] {warn}\n"
                   "gpu-b07:4410:4502 [0] NCCL INFO bootstrap.cc:285 -> 2\n"
                   + torch_nccl_error("unhandled system error"))
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["peer"] == peer and finding["evidence"]["reason"] == reason
    assert "could not open a connection" in finding["message"] and "on gpu-b07" in finding["message"]
    assert "nc -zv" in finding["fix"]["summary"]


def test_an_nccl_out_of_memory_is_not_reported_again_as_an_nccl_error(tmp_path):
    log = tmp_path / "rank3.log"
    log.write_text("gpu-c02:3001:3100 [3] include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n\n"
                   "gpu-c02:3001:3100 [3] include/alloc.h:185 NCCL WARN Failed to CUDA calloc 6291456 bytes\n"
                   "gpu-c02:3001:3100 [3] NCCL INFO transport/p2p.cc:204 -> 1\n"
                   + torch_nccl_error("unhandled cuda error"))
    fired, report = findings(log)
    assert fired == {("GD508", "error")}, report["findings"]


@pytest.mark.parametrize("bootstrap", [
    "NCCL INFO Bootstrap : Using [0]docker0:172.17.0.1<0>",        # NCCL 2.4-2.11 number each interface
    "NCCL INFO NET : Using interface docker0:172.17.0.1<0>",       # NCCL 2.2-2.3
])
def test_older_nccls_interface_lines_are_read(tmp_path, bootstrap):
    """A two-node job whose second node bootstraps over docker0, in older NCCLs' wording; the first node's lines
    say nothing else the rules read, yet it is one of the run's hosts."""
    log = tmp_path / "run.log"
    log.write_text("node-a:1201:1290 [0] NCCL INFO comm 0x55d1c0 rank 0 nranks 2\n"
                   f"node-b:2210:2210 [0] {bootstrap}\n"
                   "node-b:2210:2290 [0] NCCL INFO comm 0x7f0dc0 rank 1 nranks 2\n")
    fired, report = findings(log)
    assert fired == {("GD423", "warning")}, report["findings"]
    assert "docker0 on node-b in a job across 2 hosts" in report["findings"][0]["message"]


def test_a_dataloader_workers_bus_error_alone_is_shared_memory(tmp_path):
    """Older torch prints only the signal; it is the worker's shared-memory segment that ran out."""
    log = tmp_path / "train.log"
    log.write_text("  File \"/opt/conda/lib/python3.6/site-packages/torch/utils/data/dataloader.py\", line 175, "
                   "in handler\n    _error_if_any_worker_fails()\n"
                   "RuntimeError: DataLoader worker (pid 13) is killed by signal: Bus error.\n")
    fired, report = findings(log)
    assert fired == {("GD503", "error")}, report["findings"]


@pytest.mark.parametrize("text, killed", [
    (" 31%|#####     | 331/1063 [01:06<03:59,  3.06it/s]Killed\n", True),   # the shell's word after a progress bar
    ("[1]+  Killed                  nohup python train.py --bs 64\n", True),  # job control
    ("bash: line 1: 40412 Killed                  python train.py\n", True),
    ("Epoch 3: workers killed: 0, restarted: 0\n", False),
    ("[2024-05-01 10:00:00] scheduler: Killed=0 Failed=0\n", False),
])
def test_the_shells_killed_in_its_real_forms(text, killed):
    kinds = [e["kind"] for e in (scan(text).get("logs") or {}).get("events", [])]
    assert (kinds == ["sigkill"]) is killed, kinds


@pytest.mark.parametrize("line", [
    "/usr/local/lib/python3.10/dist-packages/torch/cuda/__init__.py:138: UserWarning: CUDA initialization: Unexpected "
    "error from cudaGetDeviceCount(). Did you run some cuda functions before calling NumCudaDevices() that might have "
    "already set an error? Error 802: system not yet initialized (Triggered internally at "
    "../c10/cuda/CUDAFunctions.cpp:108.)",                                                # torch >= 1.10
    "RuntimeError: cuda runtime error (802) : system not yet initialized at "
    "/opt/conda/conda-bld/pytorch/work/aten/src/THC/THCGeneral.cpp:50",                  # torch 1.4
    "CUDA error at bandwidthTest.cu:256 code=802(cudaErrorSystemNotReady) \"cudaSetDevice(currentDevice)\"",  # samples
])
def test_cuda_error_802_is_the_fabric_manager(tmp_path, line):
    log = tmp_path / "job.log"
    log.write_text(line + "\n")
    fired, report = findings(log)
    assert fired == {("GD105", "error")}, report["findings"]
    assert "fabric manager" in report["findings"][0]["message"]
    assert "nvidia-fabricmanager" in report["findings"][0]["fix"]["summary"]


@pytest.mark.parametrize("text, port", [
    ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
     "use).\n[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address "
     "already in use).\n[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network "
     "address.\nRuntimeError: The server socket has failed to listen on any local network address. The server socket "
     "has failed to bind to [::]:29500 (errno: 98 - Address already in use). The server socket has failed to bind to "
     "0.0.0.0:29500 (errno: 98 - Address already in use).\n", 29500),
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. port: "
     "29611, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n", 29611),
    ("torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
     "useIpv6: 0, code: -98, name: EADDRINUSE, message: address already in use\n", None),
])
def test_a_rendezvous_port_another_job_holds_is_gd611(tmp_path, text, port):
    log = tmp_path / "run.log"
    log.write_text(text)
    fired, report = findings(log)
    assert fired == {("GD612", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["port"] == port and "localhost:0" in finding["fix"]["summary"]


def test_other_socket_errors_are_not_a_taken_port(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("node-b:2210:2210 [0] NCCL INFO Bootstrap : Using ens5:10.0.0.2<0>\n"
                   "torch.distributed.DistNetworkError: The client socket has failed to connect to "
                   "[node-a]:29500 (errno: 111 - Connection refused).\n")
    fired, report = findings(log)
    assert fired == set(), report["findings"]


NINJA_NVCC = ("[1/3] /usr/local/cuda/bin/nvcc -DTORCH_EXTENSION_NAME=fused_adam --expt-relaxed-constexpr "
              "-gencode=arch=compute_89,code=sm_89 -gencode=arch=compute_89,code=compute_89 -std=c++17 -c "
              "/opt/venv/lib/python3.10/site-packages/deepspeed/ops/csrc/adam/multi_tensor_adam.cu -o "
              "multi_tensor_adam.cuda.o\n")


@pytest.mark.parametrize("tail, extension", [
    ("subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.\n\n"
     "The above exception was the direct cause of the following exception:\n\n"
     "RuntimeError: Error building extension 'fused_adam'\n", "fused_adam"),           # torch's JIT (DeepSpeed ops)
    ("error: command '/usr/local/cuda/bin/nvcc' failed with exit code 1\n", None),      # pip / setup.py install
])
def test_an_extension_build_for_an_arch_nvcc_does_not_know_is_gd310(tmp_path, tail, extension):
    log = tmp_path / "build.log"
    log.write_text("Building extension module fused_adam...\n" + NINJA_NVCC
                   + "FAILED: multi_tensor_adam.cuda.o\nnvcc fatal   : Unsupported gpu architecture 'compute_89'\n"
                   "ninja: build stopped: subcommand failed.\n" + tail)
    fired, report = findings(log)
    assert fired == {("GD310", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["arch"] == "compute_89" and finding["evidence"]["extension"] == extension
    assert "compute_89" in finding["fix"]["summary"]


def test_a_host_compiler_nvcc_refuses_is_gd310_once(tmp_path):
    error = ("/usr/local/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc "
             "versions later than 12 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to "
             "override this version check; however, using an unsupported host compiler may cause compilation "
             "failure or incorrect run time execution. Use at your own risk.\n")
    log = tmp_path / "build.log"
    log.write_text(NINJA_NVCC + error + "  143 | #error -- unsupported GNU version! gcc versions later than 12 are "
                   "not supported!\n" + error + "ninja: build stopped: subcommand failed.\n"
                   "RuntimeError: Error building extension 'fused_adam'\n")
    fired, report = findings(log)
    assert fired == {("GD310", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["compiler"] == "GNU" and "later than 12" in finding["message"]
    assert "-ccbin" in finding["fix"]["summary"]


def test_an_extension_build_failing_for_another_reason_is_not_gd310(tmp_path):
    log = tmp_path / "build.log"
    log.write_text(NINJA_NVCC + "/opt/venv/include/python3.10/Python.h:44:10: fatal error: crypt.h: No such file "
                   "or directory\nninja: build stopped: subcommand failed.\n"
                   "RuntimeError: Error building extension 'fused_adam'\n"
                   "node-a:1:1 [0] NCCL INFO Bootstrap : Using ens5:10.0.0.1<0>\n")
    fired, report = findings(log)
    assert fired == set(), report["findings"]


@pytest.mark.parametrize("warn, peer", [
    ("transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.30.2.14<54862> with status=12 opcode=0 "
     "len=0 vendor err 129 (Recv) localGid ::ffff:10.30.2.13 remoteGids::ffff:10.30.2.14", "10.30.2.14<54862>"),
    ("transport/net_ib.cc:788 NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0, vendor err 129", None),
])
def test_an_infiniband_completion_error_is_gd425_once(tmp_path, warn, peer):
    """The retry counter ran out on the link; the watchdog's timeout and torch's NCCL error after it follow from it."""
    log = tmp_path / "rank4.log"
    log.write_text(f"gpu-d03:3468:3905 [4] {warn}\ngpu-d03:3468:3905 [4] NCCL INFO transport/net.cc:1302 -> 6\n"
                   f"gpu-d03:3468:3905 [4] {warn}\n" + torch_nccl_error("remote process exited or there was a "
                                                                        "network error"))
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["status"] == 12 and finding["evidence"]["peer"] == peer
    assert "retry counter" in finding["message"] and ", 2 times" in finding["message"]
    assert "NCCL_IB_GID_INDEX" in finding["fix"]["summary"]


def test_an_infiniband_protection_error_points_at_gpudirect_rdma_and_acs(tmp_path):
    """Completion status 4 is the NIC refused access to GPU memory (ACS breaking GPUDirect RDMA), not a link fault;
    the peer's address may be left out of a paste (`from peer with error 4`)."""
    log = tmp_path / "rank0.log"
    log.write_text("node2:14159:14180 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer with "
                   "error 4, opcode 0, len 0, vendor err 81 (Send) localGid ::ffff: remoteGid ::ffff:\n")
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["evidence"]["status"] == 4 and "ACS" in finding["message"]
    assert "NCCL_NET_GDR_LEVEL=0" in finding["fix"]["summary"]


@pytest.mark.parametrize("paste, fix", [
    ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1201, internal error, NCCL "
     "version 2.14.3\nncclInternalError: Internal check failed.\nLast error:\nBootstrap : no socket interface found\n"
     "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 3710365)\n",
     "no_socket_interface"),                                                         # EasonXiao-888/MambaTree#14
    ("torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/c10d/"
     "ProcessGroupNCCL.cpp:1727, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.19.3\n"
     "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n"
     "Duplicate GPU detected : rank 3 and rank 0 both on CUDA device f000", "duplicate_gpu"),  # NVIDIA/Megatron-LM#661
    ("[trainer0|0]:ncclInternalError: Internal check failed.\n[trainer0|0]:Last error:\n[trainer0|0]:ncclSocketInit: "
     "connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)\n", "no_socket_interface"),
])                                                                                   # NVIDIA/nccl#1837
def test_nccls_last_error_under_torchs_nccl_error_is_read_as_its_warn(tmp_path, paste, fix):
    """torch repeats NCCL's last WARN under `Last error:`: the cause where the run had no NCCL_DEBUG output (also as
    a paste's last line, which the reader gets in a chunk of its own)."""
    log = tmp_path / "paste.txt"
    log.write_text(paste)
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert finding["fix"]["summary"] == next(r for r in load_catalog() if r.id == "GD425").fix_text(fix)


def test_a_last_error_that_states_no_known_cause_becomes_the_reason(tmp_path):
    """NVIDIA/nccl#1029: the line under `Last error:` is the reason GD425 gives; torch's own stack after an empty
    `Last error:` is not."""
    log = tmp_path / "paste.txt"
    log.write_text("w1: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1197, unhandled cuda "
                   "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.3\n"
                   "w1: ncclUnhandledCudaError: Call to CUDA function failed.\nw1: Last error:\n"
                   "w1: Cuda failure 'initialization error'\nw1: Traceback (most "
                   "recent call last):\n")
    _, report = findings(log)
    assert "the NCCL warning before it: 'Cuda failure 'initialization error''" in report["findings"][0]["message"]
    log.write_text("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1, unhandled system error, "
                   "NCCL version 2.19.3\nLast error:\n\nException raised from getNCCLComm at ProcessGroupNCCL.cpp:1\n")
    _, report = findings(log)
    assert "run with NCCL_DEBUG=WARN" in report["findings"][0]["message"]


def test_an_nccl_warning_that_states_its_cause_is_gd425s_finding(tmp_path):
    """A WARN of the atlas names the cause; torch's 'unhandled system error' after it is the same failure."""
    log = tmp_path / "rank0.log"
    log.write_text("node-a:11:22 [5] bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
                   + torch_nccl_error("unhandled system error"))
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    (finding,) = report["findings"]
    assert "bootstrap messages of different sizes" in finding["message"]
    assert "Message truncated" in finding["message"] and "run with NCCL_DEBUG" not in finding["message"]


@pytest.mark.parametrize("line", [
    "RuntimeError: CUDA error: uncorrectable ECC error encountered",
    "RuntimeError: cuda runtime error (39) : uncorrectable ECC error encountered at "
    "/pytorch/aten/src/THC/THCCachingHostAllocator.cpp:265",
    "failed call to cuDevicePrimaryCtxRetain: CUDA_ERROR_ECC_UNCORRECTABLE: uncorrectable ECC error encountered",
])
def test_cudas_uncorrectable_ecc_error_is_a_memory_fault(tmp_path, line):
    log = tmp_path / "train.log"
    log.write_text(line + "\n[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: "
                   "CUDA error: uncorrectable ECC error encountered\n")
    fired, report = findings(log)
    assert fired == {("GD507", "error")}, report["findings"]
    assert "hardware fault" in report["findings"][0]["message"]
    assert "ROW_REMAPPER" in report["findings"][0]["fix"]["summary"]
    log.write_text(line + "\n[Mon May  6 10:01:02 2024] NVRM: Xid (PCI:0000:3b:00): 48, pid=2481, name=python, "
                   "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition "
                   "6, subpartition 0.\n")
    fired, report = findings(log)
    assert [f["evidence"]["xid"] for f in report["findings"]] == [48]  # the Xid says more: reported once


@pytest.mark.parametrize("warn", [
    "bootstrap.cc:72 NCCL WARN Bootstrap : no socket interface found",
    "misc/socket.cc:427 NCCL WARN ncclSocketInit: connecting to address  with family 0 is neither AF_INET(2) nor "
    "AF_INET6(10)",                                                     # NCCL_SOCKET_IFNAME matched no interface
])
def test_no_interface_for_the_bootstrap_is_gd425(tmp_path, warn):
    log = tmp_path / "rank0.log"
    log.write_text("trainer-3:1958:1958 [3] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2\n"
                   f"trainer-3:1958:1958 [3] {warn}\n" + torch_nccl_error("internal error"))
    fired, report = findings(log)
    assert fired == {("GD425", "error")}, report["findings"]
    assert "no usable network interface" in report["findings"][0]["message"]


# --- kernel logs as users paste them ------------------------------------------------------------------------
# `dmesg` ([seconds]), `dmesg -T` ([date]), `dmesg --time-format iso`, and journalctl -k / syslog (`host kernel:`,
# with or without the kernel's own [seconds]); messages the kernel wraps onto `NVRM:` continuation lines.
KERNEL_PASTES = [
    pytest.param(  # https://github.com/akash-network/support/issues/244
        "root@node4:~# dmesg -T |grep NVRM\n"
        "[Sun Jul 28 09:15:27 2024] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.183.01  "
        "Sun May 12 19:39:15 UTC 2024\n"
        "[Wed Jul 31 23:14:18 2024] NVRM: GPU at PCI:0000:00:05: GPU-efbdfde9-5798-a6e7-4c46-12518fa15375\n"
        "[Wed Jul 31 23:14:18 2024] NVRM: GPU Board Serial Number: 1650423013443\n"
        "[Wed Jul 31 23:14:18 2024] NVRM: Xid (PCI:0000:00:05): 43, pid=1045242, name=pt_main_thread, Ch 00000008\n"
        "[Mon Aug  5 03:54:13 2024] NVRM: Xid (PCI:0000:00:07): 31, pid=2512125, name=python3.10, Ch 00000008, intr "
        "00000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_8 faulted @ 0x73ac_1c000000. Fault is of type FAULT_PDE "
        "ACCESS_TYPE_VIRT_WRITE\n"
        "[Fri Aug  9 13:32:56 2024] NVRM: Xid (PCI:0000:00:08): 94, pid='<unknown>', name=<unknown>, Contained: SM "
        "(0x1). RST: No, D-RST: No\n",
        {("xid", 43), ("xid", 31), ("xid", 94)}, {"GD507"}, None, id="dmesg-T-xids"),
    pytest.param(  # https://github.com/NVIDIA/gpu-operator/issues/1146
        "Dec  2 11:38:27 worker4 kernel: [  199.234935] NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor "
        "number 5\n"
        "Dec  2 11:38:46 worker4 kernel: [  218.250408] NVRM: GPU 0000:0a:00.0: "
        "RmInitAdapter failed! (0x24:0x72:1568)\n"
        "Dec  2 11:38:47 worker4 kernel: [  219.470994] NVRM: Xid (PCI:0000:07:00): 48, "
        "pid='<unknown>', name=<unknown>, "
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physAddr 0x7fffa8860 "
        "partition 7, subpartition 1.\n"
        "Dec  2 11:38:47 worker4 kernel: [  219.471050] NVRM: Xid (PCI:0000:07:00): 64, "
        "pid='<unknown>', name=<unknown>, "
        "Dynamic Page Retirement: Blacklisting failed.  "
        "Page should have been blacklisted on boot(0x00000000007fffa8).\n",
        {("xid", 48), ("xid", 64), ("driver_init_failed", None)}, {"GD507", "GD105"}, "worker4", id="syslog-kernel"),
    pytest.param(  # https://github.com/0jc1/py-autovod/issues/7
        "[Sun Mar 30 08:24:00 2025] [   7899]     0  7899  6546210  3842522 39899136  1039052\n 0 python\n"
        "[Sun Mar 30 08:24:00 2025] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
        "global_oom,task_memcg=/init.scope,task=python,pid=7899,uid=0\n"
        "[Sun Mar 30 08:24:00 2025] Out of memory: Killed process 7899 (python) total-vm:26,184,840kB, "
        "anon-rss:153,700,88kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:38964kB oom_score_adj:0\n",
        {("oom_killer", None)}, {"GD509"}, None, id="dmesg-T-oom-killer"),
    pytest.param(  # https://github.com/equinor/ert/issues/7797
        "2024-04-29T14:55:41,678628+02:00 pool invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, "
        "oom_score_adj=0\n"
        "2024-04-29T14:55:41,679700+02:00 Out of memory: Killed process 1440763 (perl) total-vm:87033376kB, "
        "anon-rss:60356340kB, file-rss:0kB, shmem-rss:0kB, UID:21417 pgtables:169956kB oom_score_adj:0\n",
        {("oom_killer", None)}, {"GD509"}, None, id="dmesg-iso-oom-killer"),
    pytest.param(  # https://github.com/saharmor/dalle-playground/issues/104
        "[ 7386.259769] NVRM: API mismatch: the client has the version 515.48.07, but\n"
        "               NVRM: this kernel module has the version 510.73.05.  Please\n"
        "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
        "               NVRM: components have the same version.\n",
        {("nvml_mismatch", None)}, {"GD105"}, None, id="dmesg-api-mismatch"),
    pytest.param(  # https://github.com/NVIDIA/NVSentinel/issues/155
        "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
        "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
        "               NVRM: fallen off the bus and is not responding to commands.\n"
        "[ 1843.439662] NVRM: The NVIDIA probe routine failed for 1 device(s).\n",
        {("gpu_lost", None), ("driver_init_failed", None)}, {"GD507", "GD105"}, None, id="dmesg-fallen-off-the-bus"),
]


@pytest.mark.parametrize("text,events,rules,host", KERNEL_PASTES)
def test_pasted_kernel_logs_are_read_in_every_timestamp_form(text, events, rules, host):
    """What a user copies from `dmesg`/`journalctl -k`: each failure line is read whatever prefix the tool put on it,
    the host a syslog line names is the event's host, and the routine lines (module loaded, serial number) are not."""
    import io

    from gpudoctor.api import evaluate
    from gpudoctor.ingest.source import snapshot_from_reports

    report = evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode())))
    found = report.facts["logs"]["events"]
    assert {(e["kind"], e.get("xid")) for e in found} == events
    assert {f.rule for f in report.findings if f.severity.name in ("ERROR", "WARNING")} == rules
    assert {e.get("host") for e in found} == {host}


def test_memory_evidence_from_an_atlas_message_is_said_in_its_words():
    """A scheduler's or the kubelet's memory kill is reported as what that message proves, not as the host's OOM
    killer; the kernel's own line still reads as the kernel's."""
    import io

    from gpudoctor.api import evaluate
    from gpudoctor.ingest.source import snapshot_from_reports

    def gd509(text):
        report = evaluate(snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode())))
        (finding,) = [f for f in report.findings if f.rule == "GD509"]
        return finding.message

    slurm = gd509("slurmstepd-dback-c11-n01: error: Job 848444 exceeded memory limit (33715636 > 32757760), being "
                  "killed\n")  # https://github.com/bcbio/bcbio-nextgen/issues/2393
    assert slurm.startswith("SLURM killed the job") and "OOM killer" not in slurm
    evicted = gd509("4m11s  Warning  Evicted  pod/egg-x  The node was low on resource: memory. Container egg was "
                    "using 5053216Ki, which exceeds its request of 0.\n")  # https://github.com/FederatedAI/KubeFATE/issues/64
    assert evicted.startswith("the kubelet evicted the pod")
    kernel = gd509("[  518.050606] Out of memory: Killed process 15784 (python3) total-vm:11964kB, anon-rss:4288kB\n")
    assert kernel.startswith("the kernel's OOM killer ended process python3 (pid 15784")
