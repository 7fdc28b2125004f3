"""`check --from DIR`: every rank's logs of one run read together (gpudoctor.ingest.run_logs, GD430–GD433).

The runs in fixtures/runs/ are real: four torchrun jobs on gloo recorded here with tools/record_run_failures.py
(one rank raises, one is SIGKILLed, one sleeps until the others time out, one calls broadcast where the others call
all_reduce), and logs of public issue threads whose discussion names the rank that failed first
(fixtures/runs/labels.toml gives each run's source and what the thread established)."""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import pytest
import tomllib
from conftest import cli_in_process

from gpudoctor.facts.run import postmortem
from gpudoctor.ingest.flight_recorder import DumpError, collectives, load
from gpudoctor.ingest.logs import LogScanner
from gpudoctor.ingest.run_files import identify
from gpudoctor.ingest.run_logs import RunReader, parse_time

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "fixtures" / "runs"
LABELS = tomllib.loads((RUNS / "labels.toml").read_text())["run"]


def check_json(*paths):
    args = ["check"]
    for path in paths:
        args += ["--from", str(path)]
    done = cli_in_process(*args, "--format", "json", cwd=ROOT)
    assert done.returncode in (0, 1), done.stderr
    return json.loads(done.stdout)


def fired(report, rule):
    return [f for f in report["findings"] if f["rule"] == rule]


@pytest.mark.parametrize("label", LABELS, ids=lambda label: label["dir"])
def test_each_run_names_who_failed_first(label):
    report = check_json(RUNS / label["dir"])
    run = report["run"]
    first = sorted(f["rank"] for f in run["first_failing"])
    assert first == label.get("first", []), (run["first_failing"], run["order"])
    if "waiting" in label:
        assert sorted(run["waiting"]) == label["waiting"]
    assert run["alike"] is label.get("alike", False)
    gd430 = fired(report, "GD430")
    if label.get("first"):
        assert gd430 and gd430[0]["severity"] == "error"
        assert f"rank {label['first'][0]} " in gd430[0]["message"]
        if "node" in label:
            assert gd430[0]["evidence"]["node"] == label["node"]
    if label.get("alike"):
        assert gd430 and gd430[0]["severity"] == "info" and "no rank failed first" in gd430[0]["message"]
    for rule, ranks in (("GD431", label.get("stopped_short")), ("GD432", label.get("mismatch"))):
        found = fired(report, rule)
        if ranks is None:
            assert not found, found
        else:
            assert found and sorted(found[0]["evidence"]["ranks"]) == ranks, found
    if "cause" in label:
        assert label["cause"] in json.dumps(run["first_failing"])


def test_the_timeline_is_in_the_text_report_earliest_first():
    done = cli_in_process("check", "--from", str(RUNS / "raise"), "--format", "plain", cwd=ROOT)
    text = done.stdout
    assert done.returncode == 1
    run = " ".join(text[text.index(" Run "):].split())
    assert "4 ranks on 1 node · failed first: rank 2" in run
    assert run.index("rank 2 (localhost) failed") < run.index("rank 1 (localhost) waited")
    assert "ValueError: bad batch at step 3" in run


def test_files_the_folder_holds_that_are_no_log_are_listed_not_errors(tmp_path):
    (tmp_path / "rank0.log").write_text("[rank0]: RuntimeError: Connection closed by peer [10.0.0.2]:5344\n")
    (tmp_path / "rank1.log").write_text("2026-05-01 10:00:00,000 step 3\n[rank1]: ValueError: bad label 7\n")
    (tmp_path / "loss.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(200))
    (tmp_path / "notes.txt").write_text("tried a smaller batch, same thing\n")
    (tmp_path / "empty.log").write_text("")
    report = check_json(tmp_path)
    assert [u["path"] for u in report["run"]["unplaced"]] == [str(tmp_path / "loss.png")]
    assert not any(f["rule"] == "GD003" for f in report["findings"])
    assert [f["rank"] for f in report["run"]["first_failing"]] == [1]
    done = cli_in_process("check", "--from", str(tmp_path), "--format", "plain", cwd=ROOT)
    assert "not placed: 1 file(s) that are no log or dump" in done.stdout


def test_a_folder_of_unrelated_files_is_read_without_error(tmp_path):
    (tmp_path / "a.txt").write_text("hello\n")
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 4)
    done = cli_in_process("check", "--from", str(tmp_path), "--format", "plain", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "nothing gpudoctor knows" in done.stdout


def test_a_glob_and_several_files_read_as_one_run():
    logs = sorted(str(p) for p in (RUNS / "sigkill").rglob("stderr.log"))
    pattern = str(RUNS / "sigkill" / "*.log")
    report = check_json(pattern, *logs)
    assert [f["rank"] for f in report["run"]["first_failing"]] == [1]


def test_names_tell_rank_and_node():
    assert identify("logs/none_x1/attempt_2/5/stderr.log").local_rank == 5
    assert identify("logs/none_x1/attempt_2/5/stderr.log").attempt == 2
    srun = identify("out/gpu-a02-13.out")
    assert (srun.node, srun.rank) == ("gpu-a02", 13)
    assert identify("nccl/gpu-b01.cluster.41234").node == "gpu-b01.cluster"
    assert identify("rank3.log").rank == 3
    assert identify("nccl_trace_rank_12").rank == 12
    assert identify("worker.log").rank is None


def _read(text_by_file):
    scanner = LogScanner()
    reader = RunReader(scanner)
    for name, text in text_by_file.items():
        reader.start_file(identify(name))
        reader.feed(name, text.encode(), 1)
    return reader.result()["run"]


def test_one_interleaved_log_is_split_by_its_prefixes():
    run = _read({"job.log": (
        "0: 2026-05-01 10:00:01,000 step 41\n"
        "1: 2026-05-01 10:00:01,000 step 41\n"
        "1: 2026-05-01 10:00:02,500 torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "0: [rank0]:[E501 10:10:02.000000 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=88, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600020 "
        "milliseconds before timing out.\n")})
    found = postmortem(run)
    assert [r["rank"] for r in found.first] == [1]
    assert found.first[0]["first_cause"]["rule"] == "GD508"
    assert [r["rank"] for r in found.waiting] == [0]
    assert found.waiting[0]["collective"]["seq"] == 88


def test_host_prefixes_name_the_node():
    run = _read({"pdsh.log": (
        "worker-1: [rank8]: RuntimeError: NCCL error: remote process exited or there was a network error\n"
        "10.0.0.5: [rank0]: ValueError: shapes do not match\n")})
    nodes = {r["rank"]: r.get("node") for r in run["ranks"]}
    assert nodes == {0: "10.0.0.5", 8: "worker-1"}


def test_without_times_several_failing_ranks_are_not_ordered():
    run = _read({"rank0.log": "ValueError: bad shape\n", "rank1.log": "KeyError: 'labels'\n",
                 "rank2.log": "RuntimeError: Connection closed by peer [10.0.0.1]:29400\n"})
    found = postmortem(run)
    assert found.first == [] and "cannot be told" in found.basis


def test_times_order_the_failing_ranks():
    run = _read({"rank0.log": "2026-05-01 10:00:09,000 ERROR\nValueError: bad shape at 10:00:09\n",
                 "rank1.log": "[rank1]:[E501 10:00:03.000000 ProcessGroupNCCL.cpp:1] RuntimeError: CUDA error: an "
                              "illegal memory access was encountered\n",
                 "rank2.log": "[E501 10:00:05.000000 x.cpp:1] RuntimeError: boom\n"})
    found = postmortem(run)
    assert [r["rank"] for r in found.first] == [1]


def test_every_rank_failing_alike_names_no_first():
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"
    found = postmortem(_read({"rank0.log": oom, "rank1.log": oom, "rank2.log": oom}))
    assert found.alike and found.first == []


def test_time_formats():
    assert parse_time("2026-12-02 00:23:50,923 INFO step")[0] == "2026-12-02 00:23:50,923"
    assert parse_time("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616]")[0] == "06-26 06:24:44.903881913"
    assert parse_time("May  1 12:00:00 gpu-a02 kernel: NVRM: Xid")[0] == "May  1 12:00:00"
    assert parse_time("no time here") is None
    assert parse_time("2026-05-01 10:00:02")[1] > parse_time("[E501 10:00:01.999 x]")[1]


def test_a_pickle_that_runs_code_is_refused_and_never_run(tmp_path):
    marker = tmp_path / "ran"
    hostile = pickle.dumps({"entries": [], "x": _Exec(f"open({str(marker)!r}, 'w').write('x')")})
    with pytest.raises(DumpError, match="refused to load builtins.exec"):
        load(hostile, "trace_rank_0")
    assert not marker.exists()
    (tmp_path / "trace_rank_0").write_bytes(hostile)
    (tmp_path / "rank1.log").write_text("ValueError: x\n")
    report = check_json(tmp_path)
    assert not marker.exists()
    assert "refused to load builtins.exec" in json.dumps(report)


class _Exec:
    """Pickles as a call of exec: what a hostile dump would run under pickle.load."""

    def __init__(self, code):
        self.code = code

    def __reduce__(self):
        return (exec, (self.code,))


def test_the_pickle_and_json_forms_of_a_dump_read_alike():
    dump_dir = RUNS / "mismatch" / "fr"
    from_pickle = collectives(load((dump_dir / "trace_rank_1").read_bytes(), "trace_rank_1"))
    from_json = collectives(load((dump_dir / "trace_rank_1.json").read_bytes(), "trace_rank_1.json"))
    assert from_pickle == from_json
    assert {(c["seq"], c["op"], str(c["sizes"])) for c in from_pickle if c["group"] == "pg 0"} == {
        (1, "ALLREDUCE", "[[1024]]"), (2, "ALLREDUCE", "[[1024]]")}


def test_more_ranks_than_the_timeline_shows_are_counted():
    logs = {f"rank{i}.log": "RuntimeError: Connection closed by peer [10.0.0.1]:29400\n" for i in range(40)}
    logs["rank17.log"] = "2026-05-01 10:00:00,000 x\ntorch.OutOfMemoryError: CUDA out of memory.\n"
    from gpudoctor.render.run_timeline import timeline_lines

    lines = timeline_lines(_read(logs), [])
    assert any("rank 17" in line and "failed" in line for line in lines)
    assert lines[-1].startswith("… 28 more rank(s)")


@pytest.mark.slow
def test_a_live_torchrun_run_is_read_back(tmp_path):
    """A real torchrun job (4 ranks on gloo, rank 1 SIGKILLed) made now and read back."""
    pytest.importorskip("torch")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from record_run_failures import record
    finally:
        sys.path.pop(0)
    out = record(tmp_path, "sigkill", timeout=180)
    report = check_json(out)
    assert [f["rank"] for f in report["run"]["first_failing"]] == [1]
    assert fired(report, "GD430")[0]["evidence"]["waiting"]


def test_a_file_whose_nccl_lines_name_one_host_is_that_node():
    run = _read({
        "a.log": "gpu-a01:4021:4021 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
                 "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n",
        "b.log": "gpu-a02:5021:5021 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\n"
                 "[rank8]: RuntimeError: NCCL error: remote process exited or there was a network error\n"})
    assert {r["rank"]: r["node"] for r in run["ranks"]} == {0: "gpu-a01", 8: "gpu-a02"}
    found = postmortem(run)
    assert [r["rank"] for r in found.first] == [0] and [r["rank"] for r in found.waiting] == [8]


def test_a_straggler_lags_the_steps_most_ranks_logged():
    from gpudoctor.facts.run import stragglers

    run = _read({f"rank{i}.log": f"2026-05-01 10:00:0{i},000 INFO step {118 if i == 2 else 120} loss 1.0\n"
                 for i in range(4)})
    behind, common = stragglers(run["ranks"])
    assert [r["rank"] for r in behind] == [2] and common == 120


def test_detail_fingerprints_show_the_rank_one_collective_short():
    line = ("[I ProcessGroupWrapper.cpp:562] [Rank {r}] Running collective: CollectiveFingerPrint(SequenceNumber={s}, "
            "OpType=ALLREDUCE, TensorShape=[], TensorDtypes=Float, TensorDeviceTypes=TensorOptions(dtype=float "
            "(default), device=cuda, layout=Strided (default), requires_grad=false (default), pinned_memory=false "
            "(default), memory_format=(nullopt)))\n")
    text = "".join(line.format(r=r, s=s) for s in (1275, 1276, 1277) for r in range(4) if not (r == 2 and s == 1277))
    from gpudoctor.facts.run import stopped_short

    behind, seq, source = stopped_short(_read({"job.log": text})["ranks"])
    assert [r["rank"] for r in behind] == [2] and seq == 1277 and source == "collective fingerprint"


def test_a_header_at_the_top_of_a_file_names_its_rank():
    run = _read({"pod-a.log": "Initializing distributed: GLOBAL_RANK: 5, MEMBER: 6/8\nValueError: bad shard\n",
                 "pod-b.log": "Distributed environment: MULTI_GPU  Backend: nccl\nNum processes: 8\nProcess index: 2\n"
                              "RuntimeError: Connection closed by peer [10.0.0.9]:29500\n"})
    assert sorted(r["rank"] for r in run["ranks"]) == [2, 5]
    assert [r["rank"] for r in postmortem(run).first] == [5]


def test_nccl_lines_without_ranks_are_placed_per_process():
    run = _read({"nccl.log": (
        "gpu-a01:4021:4090 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<5002> "
        "with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
        "gpu-a02:5021:5090 [1] misc/socket.cc:538 NCCL WARN socketProgress: Connection closed by remote peer "
        "gpu-a01<43210>\n")})
    found = postmortem(run)
    assert [(r["node"], r["pid"]) for r in found.first] == [("gpu-a01", 4021)]
    assert [(r["node"], r["pid"]) for r in found.waiting] == [("gpu-a02", 5021)]


def test_a_pod_named_file_is_its_node():
    assert identify("logs/llama-ft-worker-3.log").node == "llama-ft-worker-3"
    assert identify("logs/llama-ft-master-0").node == "llama-ft-master-0"


def test_a_run_is_a_log_given_even_where_no_line_is_one_the_log_reader_knows():
    """The sleep run's lines are gloo timeouts and Python logging only: its log rules are judged on what the logs
    show (how the processes ended: none was killed), never 'not applicable: no log'."""
    report = check_json(RUNS / "sleep")
    assert "GD509" in report["passed"]
    assert not any(item["reason"] == "no log" for item in report["not_applicable"]), report["not_applicable"]


def test_a_file_whose_rank_cannot_be_told_is_an_entry_of_unknown_rank():
    run = _read({"rank0.log": "RuntimeError: Connection closed by peer [10.0.0.2]:5344\n",
                 "rank1.log": "RuntimeError: Connection closed by peer [10.0.0.2]:5344\n",
                 "notes.log": "KeyError: 'pixel_values'\n"})
    found = postmortem(run)
    assert [(r["rank"], r["files"]) for r in found.first] == [(None, ["notes.log"])]
    from gpudoctor.facts.run import summary

    assert summary(run)["first_failing"][0]["label"] == "rank ? (notes.log)"
