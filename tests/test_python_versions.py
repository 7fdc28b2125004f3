"""The README promises Python 3.9+: vermin (a minimum-version checker) proves that gpudoctor/ uses no syntax, module,
function or keyword argument newer than 3.9, annotations included."""

import subprocess
import sys

import pytest
from conftest import ROOT

FLOOR = "3.9"


def _vermin(*paths):
    script = "import sys, vermin; sys.exit(vermin.main())"  # vermin has no __main__ module
    return subprocess.run([sys.executable, "-c", script, f"--target={FLOOR}-", "--no-tips", "--violations",
                           "--eval-annotations", "--no-parse-comments", *map(str, paths)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_the_package_runs_on_the_floor_the_readme_and_pyproject_promise():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'requires-python = ">={FLOOR}"' in pyproject
    assert f"Python** {FLOOR} or newer" in (ROOT / "README.md").read_text()
    done = _vermin(ROOT / "gpudoctor")
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_checker_catches_newer_code(tmp_path):
    """Without this the test above could pass because vermin looked at nothing."""
    (tmp_path / "new.py").write_text("def f(x: int | None):\n    match x:\n        case 1:\n            return 1\n")
    done = _vermin(tmp_path)
    assert done.returncode != 0 and "3.10" in done.stdout
