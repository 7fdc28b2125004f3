"""The textfile that `--format prometheus --output` writes, read by Debian's prometheus-node-exporter running as
its own unprivileged user (as the package runs it): every gpudoctor series is exported and the collector reports
no scrape error. Skipped with the reason where node_exporter or root is missing, unless GPUDOCTOR_REQUIRE_TOOLS=1
(.ci/run sets it and installs the package)."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import FIXTURES, gpudoctor_cmd, required_or_skip

EXPORTER = "prometheus-node-exporter"
USER = "prometheus"


def _missing_reason():
    if shutil.which(EXPORTER) is None:
        return f"{EXPORTER} not installed (apt-get install prometheus-node-exporter)"
    if os.geteuid() != 0:
        return "running node_exporter as its own user needs root"
    try:
        pwd.getpwnam(USER)
    except KeyError:
        return f"no {USER!r} user (the Debian package creates it)"
    return None


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scrape(url, process, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"node_exporter exited {process.returncode}: {process.stderr.read()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return response.read().decode()
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"node_exporter did not answer on {url}")


def _exported(folder):
    """What node_exporter, run as its own user with the textfile collector on `folder`, exports."""
    port = _free_port()
    exporter = subprocess.Popen(
        ["runuser", "-u", USER, "--", shutil.which(EXPORTER), "--collector.disable-defaults",
         "--collector.textfile", f"--collector.textfile.directory={folder}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        return _scrape(f"http://127.0.0.1:{port}/metrics", exporter)
    finally:
        exporter.terminate()
        exporter.wait(timeout=10)


@pytest.fixture
def textfile_dir():
    reason = _missing_reason()
    if reason:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", reason)
    # not under pytest's basetemp (0700): node_exporter's user must reach the folder, as it does /var/lib/...
    folder = Path(tempfile.mkdtemp(prefix="gpudoctor-textfile-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_node_exporter_reads_the_textfile_as_its_own_user(textfile_dir):
    target = textfile_dir / "gpudoctor.prom"
    machine = FIXTURES / "machines" / "k8s-pod-a100x8.json"
    result = subprocess.run(gpudoctor_cmd() + ["check", "--snapshot", str(machine), "--format", "prometheus",
                                                "--fail-on", "never", "--output", str(target)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = _exported(textfile_dir)
    assert "node_textfile_scrape_error 0" in text, text[-2000:]
    assert 'gpudoctor_rule_status{check="gpudoctor",name="gpu-unhealthy",rule="GD506",status="error"} 1' in text
    assert 'gpudoctor_rule_status{check="gpudoctor",name="gpu-unhealthy",rule="GD506",status="passed"} 0' in text
    # no DeepSpeed config given: GD304 is not applicable, a state of its own, never passed
    assert ('gpudoctor_rule_status{check="gpudoctor",name="ds-offload-param-needs-zero3",rule="GD304",'
            'status="not_applicable"} 1') in text
    assert ('gpudoctor_rule_status{check="gpudoctor",name="ds-offload-param-needs-zero3",rule="GD304",'
            'status="passed"} 0') in text
    assert 'gpudoctor_findings{check="gpudoctor",severity="error"} 2' in text


def test_two_gpudoctor_files_in_one_folder_both_arrive(textfile_dir):
    """A Prolog's node check and a cron job's full check write gpudoctor-prolog.prom and gpudoctor.prom into one
    folder: each series carries its file's name as `check`, so node_exporter takes both files, no error."""
    machine = FIXTURES / "machines" / "k8s-pod-a100x8.json"
    for name, select in (("gpudoctor.prom", "GD1,GD5"), ("gpudoctor-prolog.prom", "GD105,GD5")):
        result = subprocess.run(gpudoctor_cmd() + ["check", "--snapshot", str(machine), "--select", select,
                                                    "--format", "prometheus", "--fail-on", "never",
                                                    "--output", str(textfile_dir / name)],
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
    text = _exported(textfile_dir)
    assert "node_textfile_scrape_error 0" in text, text[-2000:]
    for check in ("gpudoctor", "gpudoctor-prolog"):
        assert f'gpudoctor_rule_status{{check="{check}",name="gpu-unhealthy",rule="GD506",status="error"}} 1' in text
        assert f'gpudoctor_info{{check="{check}",' in text
