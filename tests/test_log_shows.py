"""A rule passes on a paste only where the paste states what it judges. A rule that judges only a log needs the log to
show the part of the run it judges (catalog `log_shows`): a fragment holding one recognised message passes nothing
else, a full healthy run log still passes what it shows. GD502 needs the GPUs' processes or their memory in use."""

from __future__ import annotations

from conftest import ROOT

from gpudoctor.api import evaluate
from gpudoctor.catalog import find_rule, load_catalog
from gpudoctor.engine import evaluate as run_rules
from gpudoctor.ingest.source import snapshot_from_reports
from gpudoctor.snapshot import Snapshot

C10D = ("[E socket.cpp:860] [c10d] The client socket has failed to connect to any network address of (10.0.0.1, "
        "29500). The client socket has failed to connect to 10.0.0.1:29500 (errno: 110 - Connection timed out).\n"
        "[W socket.cpp:601] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - Cannot "
        "assign requested address).\n")
LOG_ONLY = {"GD301", "GD310", "GD412", "GD420", "GD421", "GD422", "GD423", "GD425", "GD507", "GD508", "GD509",
            "GD601", "GD609", "GD612"}


def _report(tmp_path, text):
    path = tmp_path / "paste.txt"
    path.write_text(text)
    return evaluate(snapshot_from_reports([str(path)]))


def test_a_two_line_c10d_fragment_passes_nothing_it_does_not_show(tmp_path):
    report = _report(tmp_path, C10D)
    assert {f.rule for f in report.findings} == {"GD424"}
    assert report.passed == ()
    held = {u.rule: u.reason for u in report.unknown if u.missing == "logs.shows"}
    assert LOG_ONLY <= set(held)
    assert held["GD425"] == "the log does not show NCCL's setup (NCCL INFO lines)"


def test_a_full_healthy_run_log_passes_what_it_shows(tmp_path):
    nccl = (ROOT / "fixtures" / "logs" / "nccl_single_node_socket.log").read_text()
    text = nccl + "[2025-01-01 10:00:00] [INFO] [launch.py:351:main] Process 4242 exits successfully.\n" \
                  "torch.distributed.elastic: worker group finished, exitcode: 0\n"
    report = _report(tmp_path, text)
    assert not report.findings
    assert {"GD412", "GD420", "GD421", "GD422", "GD423", "GD424", "GD425", "GD508", "GD509", "GD601", "GD609",
            "GD612"} <= set(report.passed)
    unknown = {u.rule for u in report.unknown}
    assert {"GD301", "GD310", "GD507"} <= unknown  # no build, no kernel messages in it


def test_a_kernel_log_without_xids_passes_gd507_and_a_training_log_does_not(tmp_path):
    dmesg = "[   12.345678] NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\n" \
            "[ 9001.000001] Out of memory: Killed process 14750 (python3) total-vm:98765432kB, anon-rss:65432100kB\n"
    report = _report(tmp_path, dmesg)
    assert "GD509" in {f.rule for f in report.findings}
    assert "GD507" in report.passed
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of " \
          "79.10 GiB of which 3.19 MiB is free.\n"
    report = _report(tmp_path, oom)
    assert "GD508" in {f.rule for f in report.findings}
    assert "GD507" in {u.rule for u in report.unknown}


def test_machine_facts_beside_a_log_still_decide():
    """The log holds the rule back only where it judged log facts alone: DS_BUILD_OPS=0 passes GD301 beside a log
    that shows no build."""
    rule = find_rule("GD301")
    passing = next(ex for ex in rule.examples if not ex.fires and "DS_BUILD_OPS=0" in ex.name)
    logs = {"files": ["run.log"], "events": [{"kind": "cuda_oom", "where": "run.log line 1", "line": "x"}],
            "shows": []}
    report = run_rules(Snapshot(facts={**passing.facts, "logs": logs}), [rule])
    assert report.passed == ("GD301",)


def test_every_log_only_rule_declares_what_its_log_must_show():
    declared = {rule.id for rule in load_catalog() if rule.log_shows}
    assert LOG_ONLY | {"GD424"} <= declared


def test_gd502_passes_only_where_the_paste_lists_processes_or_no_memory_in_use(tmp_path):
    collect_env = ("PyTorch version: 2.5.1+cu121\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n"
                   "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\nNvidia driver version: 535.183.01\n")
    held = {u.rule: u.reason for u in _report(tmp_path, collect_env).unknown}
    assert "processes" in held["GD502"]
    smi = (ROOT / "fixtures" / "pastes" / "healthy-nvidia-smi-rtx3090-docker-host.txt").read_text()  # 0MiB used
    assert "GD502" in _report(tmp_path, smi).passed


def test_machine_facts_that_only_qualify_the_log_do_not_make_it_show_more(tmp_path):
    """A collect_env beside the fragment states the GPUs, which GD412 reads to qualify a hang: it still needs NCCL's
    setup in the log to pass."""
    collect_env = ("PyTorch version: 2.5.1+cu121\nIs CUDA available: True\nCUDA used to build PyTorch: 12.1\n"
                   "GPU models and configuration:\nGPU 0: NVIDIA GeForce RTX 4090\nGPU 1: NVIDIA GeForce RTX 4090\n"
                   "Nvidia driver version: 535.183.01\n")
    report = _report(tmp_path, collect_env + C10D)
    assert "GD412" not in report.passed and "GD412" in {u.rule for u in report.unknown}
