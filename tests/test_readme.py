"""The README stays true: its set-up commands match .ci/run and its rule table lists the catalog."""

import os
import re
import shutil
import subprocess

import pytest

from conftest import ROOT, gpudoctor_cmd
from gpudoctor.catalog import load_catalog

README = (ROOT / "README.md").read_text()


def test_every_rule_is_in_the_readme_table():
    for rule in load_catalog():
        assert f"| {rule.id} | {rule.name} |" in README, f"{rule.id} missing from the README rule table"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pip install torch==2.13.0 && pip install -e '.[test]' && pytest" in README
    for step in ("pip install -q torch==2.13.0", "pip install -q -e '.[test]'", "\npytest"):
        assert step in ci
    assert "pip install -e . && gpudoctor check" in README


def _readme_block(command: str) -> str:
    return README.split(f"$ {command}\n", 1)[1].split("```", 1)[0]


def _normal(text: str) -> str:
    """Rules joining the catalog change the count of passed rules, and the clock the duration."""
    return re.sub(r"\d+ passed", "N passed", re.sub(r"\d+\.\d s\n", "T s\n", text)).rstrip()


@pytest.mark.parametrize("command,files", [
    ("gpudoctor check --snapshot ws-6000ada.json --ds-config zero2_offload.json",
     {"ws-6000ada.json": "fixtures/machines/rtx6000ada-nvcc115-cu124.json",
      "zero2_offload.json": "fixtures/ds_configs/zero2_offload.json"}),
    ("gpudoctor check --from report.txt --select GD1,GD2",
     {"report.txt": "../shared/corpus/pt-43058-driver-old.txt"}),
])
def test_readme_examples_are_real_output(tmp_path, command, files):
    for name, source in files.items():
        shutil.copy(ROOT / source, tmp_path / name)
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS="110")
    done = subprocess.run(gpudoctor_cmd() + command.split()[1:] + ["--no-color"], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=60)
    assert _normal(_readme_block(command)) == _normal(done.stdout)
