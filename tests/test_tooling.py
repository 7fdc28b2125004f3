"""The tooling's promises: `ruff check` passes on the whole tree with the rules pyproject.toml selects, and the
wheel says it is typed (py.typed) because `mypy gpudoctor` passes with pyproject.toml's configuration."""

import importlib.util
import subprocess
import sys

import pytest
from conftest import ROOT, required_or_skip

LINTED = ("gpudoctor", "tests", "tools", "benchmarks")


def _tool(module: str, *args, cwd=ROOT) -> subprocess.CompletedProcess:
    if importlib.util.find_spec(module) is None:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", f"{module} is not installed (pip install -e '.[test]')")
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd)


def test_ruff_finds_nothing_with_the_projects_rules():
    done = _tool("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_reads_the_projects_rules(tmp_path):
    """Without this the test above could pass because ruff selected nothing: a line of 121 characters, an unused
    import and an unsorted import block each fail under pyproject.toml's rules."""
    (tmp_path / "bad.py").write_text("import sys\nimport os\n\nX = '" + "x" * 115 + "'\n")
    done = _tool("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--output-format",
                 "concise", str(tmp_path / "bad.py"), cwd=tmp_path)
    assert done.returncode == 1
    codes = {word for word in done.stdout.split() if word[:1] in "EFI" and word[1:].isdigit()}
    assert {"E501", "F401", "I001"} <= codes


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package():
    done = _tool("mypy", "--config-file", str(ROOT / "pyproject.toml"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout


@pytest.mark.slow
def test_mypy_reads_the_projects_configuration(tmp_path):
    """Without this the test above could pass because mypy checked nothing: a module that returns a str where it
    says int fails under pyproject.toml's configuration."""
    (tmp_path / "bad.py").write_text("def f() -> int:\n    return 'x'\n")
    done = _tool("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--no-incremental", str(tmp_path / "bad.py"),
                 cwd=tmp_path)
    assert done.returncode == 1 and "[return-value]" in done.stdout
