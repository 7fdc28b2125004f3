"""End to end: `gpudoctor check --from REPORT` and `gpudoctor snapshot --from REPORT` on real and constructed
reports, run as a user runs them (in this process; a subprocess where stdin is piped), with the verdicts in
../shared/corpus/labels.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_in_process

from gpudoctor.ingest.registry import in_words

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
REPORTS = ROOT / "fixtures" / "reports"
FAMILY_RULE = {"driver_too_old": "GD101", "nvcc_torch_mismatch": "GD102", "cpu_only_torch": "GD103",
               "bf16_unsupported": "GD201"}

needs_shared = pytest.mark.usefixtures("corpus")  # skips without ../shared/corpus, fails if CI requires it


def gpudoctor(*args, stdin=None, cwd=None):
    """The CLI's exit code, stdout and stderr (bytes), run from `cwd` (the checkout). In this process, unless
    `stdin` is given: then a real pipe feeds a real process, which is what those tests are about."""
    if stdin is None:
        done = cli_in_process(*args, cwd=cwd or ROOT)
        return subprocess.CompletedProcess(args, done.returncode, done.stdout.encode(), done.stderr.encode())
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "gpudoctor", *map(str, args)], input=stdin, capture_output=True,
                          timeout=120, env=env, cwd=cwd or ROOT)


def check_json(*paths, extra=()):
    args = ["check"]
    for p in paths:
        args += ["--from", p]
    proc = gpudoctor(*args, "--format", "json", *extra)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    report = json.loads(proc.stdout)
    assert report["schema"] == "gpudoctor.report/1"
    assert report["source"]["kind"] == "report"
    return proc.returncode, report


def errors(report):
    return sorted(f["rule"] for f in report["findings"] if f["severity"] == "error")


def _labels():
    if not (CORPUS / "labels.json").is_file():
        return [{"id": "corpus-absent"}]  # one test that skips (or fails where the corpus is required)
    return json.loads((CORPUS / "labels.json").read_text())


@needs_shared
@pytest.mark.parametrize("label", _labels(), ids=lambda label: label["id"])
def test_corpus_verdicts(label):
    code, report = check_json(CORPUS / (label["id"] + ".txt"))
    assert report["source"]["paths"] == [str(CORPUS / (label["id"] + ".txt"))]
    fired = {f["rule"]: f["severity"] for f in report["findings"]}
    for family in label["expected"]:
        if family == "none":
            assert errors(report) == [], report["findings"]
            assert code == 0
        else:
            rule = FAMILY_RULE[family]
            assert rule in fired, (rule, report["findings"])
            if family != "bf16_unsupported":
                assert fired[rule] == "error"
                assert code == 1


@pytest.mark.parametrize("name, expected_errors", [
    ("collect_env_cpu_only_conda_cudatoolkit.txt", ["GD103"]),   # CPU torch beside a GPU + conda cudatoolkit
    ("ds_report_envblock_only_mismatch.txt", ["GD102"]),         # nvcc 11.5 vs torch cu124
    ("collect_env_driver_warning_11040.txt", ["GD101"]),         # only the torch warning tells the driver
    ("nvidia_smi_error_wrapped_typographic.txt", ["GD105"]),     # driver not loaded
    ("mixed_issue_smi_collect_env_ds.txt", ["GD102", "GD310"]),
    ("collect_env_macos_arm64.txt", []),                          # no NVIDIA GPU: CPU torch is right
    ("pip_show_torch_cpu.txt", []),                               # a CPU wheel, nothing known about a GPU
    ("collect_env_rocm.txt", []),
])
def test_fixture_verdicts(name, expected_errors):
    code, report = check_json(REPORTS / name)
    assert errors(report) == expected_errors
    assert code == (1 if expected_errors else 0)


def test_healthy_traps_give_no_error(tmp_path):
    # report_formats.md: driver 535 (CUDA 12.2) + cu128 wheel + system CUDA 12.9 is fine (12.x MVC)
    smi = (REPORTS / "nvidia_smi_535_wrapped_80col.txt").read_text()
    pip = "Name: torch\nVersion: 2.7.0+cu128\n"
    nvcc = ("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.9, V12.9.86\n"
            "Build cuda_12.9.r12.9/compiler.35813241_0\n")
    path = tmp_path / "trap.txt"
    path.write_text(smi + "\n$ pip show torch\n" + pip + "\n$ nvcc -V\n" + nvcc)
    code, report = check_json(path)
    assert errors(report) == [] and code == 0


def test_several_reports_merge(tmp_path):
    code, report = check_json(REPORTS / "nvidia_smi_470_table.txt", REPORTS / "pip_show_torch_no_tag.txt",
                              REPORTS / "nvcc_windows_prompt.txt")
    assert len(report["source"]["paths"]) == 3
    assert report["conflicts"] == []


def test_conflicting_reports_are_reported(tmp_path):
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    a.write_text("Name: torch\nVersion: 2.1.0+cu121\n")
    b.write_text("Name: torch\nVersion: 2.2.0+cu118\n")
    proc = gpudoctor("snapshot", "--from", a, "--from", b)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert snap["facts"]["torch"]["version"] == "2.1.0+cu121"
    assert {"fact": "torch.version", "values": ["2.1.0+cu121", "2.2.0+cu118"],
            "sources": [str(a), str(b)]} in snap["conflicts"]
    assert {"fact": "torch.cuda", "values": ["12.1", "11.8"], "sources": [str(a), str(b)]} in snap["conflicts"]


def test_snapshot_from_report_replays(tmp_path):
    out = tmp_path / "snap.json"
    proc = gpudoctor("snapshot", "--from", REPORTS / "ds_report_envblock_only_mismatch.txt", "-o", out)
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(out.read_text())
    assert snap["schema"] == "gpudoctor.snapshot/1"
    assert snap["source"]["kind"] == "report" and snap["source"]["formats"] == ["ds_report"]
    assert snap["facts"]["nvcc"]["version"] == "11.5" and snap["facts"]["torch"]["cuda"] == "12.4"
    assert snap["evidence"]["nvcc.version"].endswith("(DeepSpeed's $CUDA_HOME/bin/nvcc)")
    assert "nvml.driver_version" in snap["source"]["missing"]
    proc = gpudoctor("check", "--snapshot", out, "--format", "json")
    assert proc.returncode == 1
    assert errors(json.loads(proc.stdout)) == ["GD102"]


def test_stdin():
    proc = gpudoctor("check", "--from", "-", "--format", "json",
                     stdin=(REPORTS / "collect_env_cpu_only_conda_cudatoolkit.txt").read_bytes())
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert errors(report) == ["GD103"] and report["source"]["paths"] == ["<stdin>"]


def test_utf16_report_from_powershell(tmp_path):
    path = tmp_path / "smi.txt"
    path.write_bytes((REPORTS / "nvidia_smi_windows_wddm.txt").read_text().encode("utf-16"))
    proc = gpudoctor("snapshot", "--from", path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["facts"]["nvml"]["driver_version"] == "531.41"


@pytest.mark.parametrize("content", [b"", b"\x00" * 1000, os.urandom(4096),
                                     (REPORTS / "nvidia_smi_xml_entity_bomb.xml").read_bytes()],
                         ids=["empty", "nuls", "random", "xml-bomb"])
def test_unreadable_report_is_exit_2_one_line(tmp_path, content):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    proc = gpudoctor("check", "--from", path, "--format", "json")
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert err.startswith("gpudoctor: error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert proc.stdout == b""


def test_missing_file_and_bad_combinations(tmp_path):
    proc = gpudoctor("check", "--from", tmp_path / "nope.txt")
    assert proc.returncode == 2 and b"no such file" in proc.stderr
    proc = gpudoctor("check", "--from", REPORTS / "nvcc_crlf.txt", "--snapshot", REPORTS / "nvcc_crlf.txt")
    assert proc.returncode == 2 and b"cannot read snapshot" in proc.stderr and proc.stderr.count(b"\n") == 1
    proc = gpudoctor("check", "--from", tmp_path)
    assert proc.returncode == 2 and proc.stderr.count(b"\n") == 1


def test_one_bad_report_among_good_ones_is_gd003(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"\x7fELF\x02\x01\x01\x00" * 64)
    code, report = check_json(REPORTS / "collect_env_macos_arm64.txt", bad)
    assert code == 1
    (finding,) = [f for f in report["findings"] if f["rule"] == "GD003"]
    assert finding["severity"] == "error" and str(bad) in finding["message"]


@pytest.mark.parametrize("text", ["just some words\n", "$ python train.py\nEpoch 1/3\r\nloss 0.41\n",
                                  "<details><summary>log</summary>\n\n```\nhello\n```\n</details>\n"])
def test_a_text_with_nothing_known_is_one_line_and_no_verdict(tmp_path, text):
    path = tmp_path / "paste.txt"
    path.write_text(text)
    code, report = check_json(path)
    lines = text.count("\n")
    assert code == 0 and report["source"]["nothing"] == (f"nothing gpudoctor knows in {lines} line{'s' * (lines > 1)} "
                                                         f"(it reads {in_words()})")
    assert report["passed"] == [] and report["findings"] == [] and report["not_applicable"] == []
    assert {item["missing"] for item in report["unknown"]} == {"report"}


def test_a_paste_passes_no_rule_it_states_nothing_about(tmp_path):
    """One NCCL WARN line nothing reads: no rule passes on it (18 did: GD107, GD601, GD609 among them)."""
    path = tmp_path / "warn.txt"
    path.write_text("node1:2041:2107 [0] misc/somewhere.cc:12 NCCL WARN something nobody documented\n")
    code, report = check_json(path)
    assert code == 0 and not {"GD107", "GD601", "GD609", "GD507", "GD508", "GD509"} & set(report["passed"])


@pytest.mark.slow
def test_cut_and_huge_reports(tmp_path):
    text = (REPORTS / "mixed_issue_smi_collect_env_ds.txt").read_text()
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: len(text) // 2])
    code, report = check_json(cut)
    assert report["findings"] is not None
    big = tmp_path / "big.txt"
    with open(big, "w") as fh:
        block = "".join(p.read_text() for p in sorted(REPORTS.glob("collect_env_*.txt"))) + "\n"
        for _ in range(50 * 2 ** 20 // len(block) + 1):
            fh.write(block)
    proc = gpudoctor("check", "--from", big, "--format", "json")
    assert proc.returncode in (0, 1) and proc.stderr.count(b"\n") <= 1, proc.stderr
    assert json.loads(proc.stdout)["summary"]


def test_a_hinted_fact_is_shown_with_its_evidence(run_cli):
    """The torch warning 'found version 11040' is the only driver evidence: it is used, and said so."""
    from conftest import FIXTURES

    report = FIXTURES / "reports" / "collect_env_driver_warning_11040.txt"
    code, out, _ = run_cli("check", "--from", report, "--select", "GD101")
    assert code == 1 and "✗ GD101" in out
    out = " ".join(out.split())  # wrapped to the terminal's width
    assert "inferred: nvml.cuda_driver_version = 11.4 (inferred from torch's warning: found version 11040" in out
    code, out, _ = run_cli("check", "--from", report, "--select", "GD101", "--format", "json")
    assert "11040" in json.loads(out)["evidence"]["nvml.cuda_driver_version"]


def test_pip_show_with_cuda_wheels_is_a_cuda_build_not_cpu_only(run_cli):
    """`pip show torch` without a +cu tag but requiring nvidia-*-cu12: a CUDA 12 build, inferred and said so; a
    driver that supports CUDA 11.4 only is then too old (GD101), and nothing calls torch CPU-only."""
    code, out, _ = run_cli("check", "--from", REPORTS / "pip_show_torch_no_tag.txt", "--format", "plain")
    assert "torch 2.3.0 (CUDA 12)" in out and "CPU-only" not in out
    assert "inferred: torch.cuda = 12 (inferred from the nvidia-*-cu12 wheels torch" in " ".join(out.split())
    code, out, _ = run_cli("check", "--from", REPORTS / "pip_show_torch_no_tag.txt", "--format", "json")
    assert "inferred from the nvidia-*-cu12 wheels torch requires" in json.loads(out)["evidence"]["torch.cuda"]
    code, report = check_json(REPORTS / "nvidia_smi_470_table.txt", REPORTS / "pip_show_torch_no_tag.txt")
    assert "GD101" in errors(report) and "GD103" not in errors(report)
    code, out, _ = run_cli("check", "--from", REPORTS / "pip_show_torch_conda.txt", "--format", "plain")
    assert "torch 2.1.0 (CUDA build unknown)" in out and "CPU-only" not in out


def test_pip_show_cuda_major_alone_is_no_minor_mismatch(tmp_path):
    """Only the major is known: nvcc 12.1 beside a CUDA 12 torch is no GD102 warning about a minor skew."""
    code, report = check_json(REPORTS / "pip_show_torch_no_tag.txt", REPORTS / "nvcc_crlf.txt")
    assert [f for f in report["findings"] if f["rule"] == "GD102"] == []


def test_pasted_nvidia_smi_gd502_counts_compute_processes_only():
    """Xorg and compiz (type G) hold memory on a desktop: no GD502; a python (type C) does."""
    code, report = check_json(REPORTS / "nvidia_smi_390_no_cuda_version.txt", extra=("--select", "GD502"))
    assert report["findings"] == [] and report["summary"]["passed"] == 1
    code, report = check_json(REPORTS / "nvidia_smi_470_table.txt", extra=("--select", "GD502"))
    (finding,) = report["findings"]
    assert finding["evidence"]["gpu"] == 0 and [p["pid"] for p in finding["evidence"]["processes"]] == [23456]


def test_deepspeed_from_pasted_text_gd303_and_gd509(tmp_path):
    """`nvcc --version` + ds_report + an env file: GD303 without nvcc's path; the launcher's return code -9 is GD509."""
    nvcc = tmp_path / "nvcc.txt"
    nvcc.write_text("nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 11.5, V11.5.119\n")
    env = tmp_path / "job.env"
    env.write_text("DS_SKIP_CUDA_CHECK=1\n")
    code, report = check_json(nvcc, REPORTS / "ds_report_envblock_only_mismatch.txt", extra=("--env-file", str(env)))
    assert "GD303" in {f["rule"] for f in report["findings"]}
    log = tmp_path / "launcher.txt"
    log.write_text("[2023-04-14 13:11:27,885] [ERROR] [launch.py:434:sigkill_handler] ['/usr/bin/python3', '-u', "
                   "'main.py', '--local_rank=0'] exits with return code = -9\n")
    code, report = check_json(log)
    assert "GD509" in {f["rule"] for f in report["findings"]}
