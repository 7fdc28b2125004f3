"""The wheel carries the rule catalog and the knowledge tables, and an installed wheel finds them."""

import os
import re
import shlex
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

# The installed copy must be what runs: a PYTHONPATH pointing at a checkout would shadow it.
CLEAN_ENV = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


def _venv(target: Path) -> Path:
    """A fresh virtual environment whose dependencies (rich, psutil…) come from this test run's environment, after
    what is installed in it. No pip of its own (ensurepip costs 4 s of CPU): this run's pip installs into it with
    --python."""
    venv.EnvBuilder(with_pip=False).create(target)
    purelib = subprocess.run([str(target / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return target / "bin"


@pytest.mark.slow
def test_wheel_ships_rules_and_works_when_installed(tmp_path):
    clean_env = CLEAN_ENV
    # the backend of this environment (an isolated build installs it again, 1 s of CPU): the README's install line
    # below builds in isolation, as a user's pip does
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp_path / "dist"),
                    str(ROOT)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("gpudoctor-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {path.relative_to(ROOT / "rules").as_posix() for path in (ROOT / "rules").rglob("*.toml")}
    assert {f"gpudoctor/_rules/{name}" for name in shipped} <= names
    schemas = {path.name for path in (ROOT / "docs" / "schemas").glob("*.schema.json")}
    assert {f"gpudoctor/_schemas/{name}" for name in schemas} <= names
    assert "gpudoctor/probes/torch_child.py" in names and "gpudoctor/probes/nvml_child.py" in names
    assert "gpudoctor/py.typed" in names  # PEP 561: the library API (docs/library.md) is typed for its callers

    target = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(_venv(target) / "python"), "install",
                    "-q", "--no-deps", str(wheel)], check=True)
    listing = subprocess.run([str(target / "bin" / "gpudoctor"), "rules"], capture_output=True, text=True,
                             cwd=tmp_path, check=True, env=clean_env).stdout
    assert "GD101  driver-too-old" in listing
    where = subprocess.run([str(target / "bin" / "python"), "-c",
                            "from gpudoctor.data import rules_dir; print(rules_dir())"],
                           capture_output=True, text=True, cwd=tmp_path, check=True, env=clean_env).stdout
    assert "_rules" in where and str(ROOT) not in where


@pytest.mark.slow
def test_the_readmes_install_line_for_a_local_clone_works(tmp_path):
    """The README's `pip install "gpudoctor @ git+file://localhost/…"`, its arguments as written with a clone of
    this repository in place of its example path (pip builds what is committed), into a fresh venv."""
    (line,) = re.findall(r'^ +(pip install "gpudoctor @ git\+file://localhost(/\S+)")',
                         (ROOT / "README.md").read_text(),
                         re.M)
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    clone = tmp_path / "src" / "gpudoctor"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=120)
    command = shlex.split(line[0].replace(line[1], str(clone)))
    bin_dir = _venv(tmp_path / "venv")
    assert command[:2] == ["pip", "install"]
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), *command[1:], "-q", "--no-deps"],
                   check=True, timeout=300)
    listing = subprocess.run([str(bin_dir / "gpudoctor"), "rules"], capture_output=True, text=True, cwd=tmp_path,
                             check=True, env=CLEAN_ENV, timeout=60).stdout
    assert "GD101  driver-too-old" in listing
