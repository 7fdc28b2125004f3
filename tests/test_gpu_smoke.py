"""tools/gpu-smoke, the checks for a real GPU machine: its parts that need no GPU run here (--dry-run)."""

import subprocess
import sys

from conftest import ROOT


def test_gpu_smoke_dry_run_passes_on_cpu():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gpu-smoke"), "--dry-run"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines and all(line.startswith("PASS ") for line in lines), done.stdout + done.stderr
    assert any("pynvml_on_pythonpath_only" in line for line in lines)
