"""The shell reader's variable values against real bash: each job script of the fixtures (written after real ones)
and a few constructs users write (`+=`, defaults, arrays, `set -a`) is sourced by bash with no command to run (PATH
empty, every missing command a no-op, `set -e`/`-u` taken out), and every variable the reader says is exported with
a known value, unconditionally, must be what bash exports at the end."""

import os
import re
import shutil
import subprocess

import pytest
from conftest import FIXTURES

from gpudoctor.readers.shell.jobs import read_script

BASH = shutil.which("bash") or "bash"
HARNESS = r"""
command_not_found_handle() { return 0; }
set() { local a args=(); for a in "$@"; do case $a in -[a-z]*) a=${a//e/}; a=${a//u/}; [ "$a" = "-" ] && continue;;
        esac; args+=("$a"); done; builtin set "${args[@]}"; }
trap 'declare -px > "$GD_OUT"' EXIT
source "$1"
"""
SCRIPTS = sorted(p for folder in ("jobs", "launch") for pattern in ("*.sh", "*.sbatch")
                 for p in (FIXTURES / folder).glob(pattern))
CONSTRUCTS = {
    "append": "export X=ib0; export X+=,ib1\nY=a\nY+=b\nexport Y\n",
    "append_array": "ARGS=(--a 1)\nARGS+=(--b 2)\nexport Z=\"${ARGS[@]}\"\n",
    "defaults": "export A=${UNSET_IN_TEST:-8}\nB=x\nexport C=\"${B}y\" D='$B'\n",
    "allexport": "set -a\nE=1\nset +a\nF=2\nexport G=$E$F\n",
    "reassigned": "export H=1\nH=2\nI=3; export I; I=4\n",
}


def bash_exports(path, tmp_path):
    out = tmp_path / "exports"
    subprocess.run([BASH, "-c", HARNESS, "bash", str(path)], cwd=tmp_path, capture_output=True, timeout=20,
                   env={"PATH": "/nonexistent", "HOME": str(tmp_path), "GD_OUT": str(out)}, stdin=subprocess.DEVNULL)
    found = {}
    for line in out.read_text().splitlines():
        match = re.match(r'declare -\S*x\S* ([A-Za-z_]\w*)="(.*)"$', line)
        if match:
            found[match.group(1)] = re.sub(r'\\(["\\$`])', r"\1", match.group(2))
    return found


def reader_exports(path):
    result, _ = read_script(path.read_text(), str(path))
    last = {}
    for assignment in result.assignments:
        if assignment.scope == str(path):
            last[assignment.name] = assignment
    return {name: a.value for name, a in last.items()
            if not (a.unresolved or a.conditional or a.unset or a.context)}


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("name", [p.relative_to(FIXTURES).as_posix() for p in SCRIPTS] + sorted(CONSTRUCTS))
def test_the_shell_reader_agrees_with_bash(name, tmp_path):
    if name in CONSTRUCTS:
        path = tmp_path / f"{name}.sh"
        path.write_text("#!/bin/bash\n" + CONSTRUCTS[name])
    else:
        path = FIXTURES / name
    work = tmp_path / "run"
    work.mkdir()
    known = reader_exports(path)
    if name in CONSTRUCTS:
        assert known, "the construct exports nothing the reader knows"
    real = bash_exports(path, work)
    assert {key: real.get(key) for key in known} == known
    assert os.listdir(work) == ["exports"]  # nothing ran: no file written but the harness's
