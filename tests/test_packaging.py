"""The wheel carries the rule catalog and the knowledge tables, and an installed wheel finds them."""

import os
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

from conftest import ROOT


def test_wheel_ships_rules_and_works_when_installed(tmp_path):
    # The installed wheel must be what runs: a PYTHONPATH pointing at a checkout would shadow it.
    clean_env = {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path / "dist"), str(ROOT)],
                   check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("gpudoctor-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {path.relative_to(ROOT / "rules").as_posix() for path in (ROOT / "rules").rglob("*.toml")}
    assert {f"gpudoctor/_rules/{name}" for name in shipped} <= names
    assert "gpudoctor/probes/torch_child.py" in names and "gpudoctor/probes/nvml_child.py" in names

    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(target)
    subprocess.run([str(target / "bin" / "pip"), "install", "-q", "--no-deps", str(wheel)], check=True)
    # The dependencies (rich, psutil…) come from this test run's environment, after the wheel on sys.path.
    purelib = subprocess.run([str(target / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    listing = subprocess.run([str(target / "bin" / "gpudoctor"), "rules"], capture_output=True, text=True,
                             cwd=tmp_path, check=True, env=clean_env).stdout
    assert "GD101  driver-too-old" in listing
    where = subprocess.run([str(target / "bin" / "python"), "-c",
                            "from gpudoctor.data import rules_dir; print(rules_dir())"],
                           capture_output=True, text=True, cwd=tmp_path, check=True, env=clean_env).stdout
    assert "_rules" in where and str(ROOT) not in where
