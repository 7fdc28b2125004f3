"""Re-record every example in README.md and docs/*.md from real runs, and regenerate the generated pages.

    python tools/record_docs.py            # rewrite the pages in place
    python tools/record_docs.py --check    # list the examples that differ, change nothing (exit 1 if any)

An example is a fenced block whose first line is `$ gpudoctor …`; the rest of the block is what the command prints
(stdout, then stderr), run from the repository's root at COLUMNS=80 with no colour. A README block under
`<!-- tmux session, N columns -->` is a session (`$ cd DIR`, then commands) re-run at N columns. A block under
`<!-- numbers vary -->` (a real benchmark) is re-recorded too; tests/test_readme.py compares it with its numbers
replaced. docs/snapshot.md and docs/messages.md are generated from rules/ by their modules.
tests/test_readme.py checks the pages against the same runs, exactly.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator, List, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the gpudoctor of this checkout
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE = re.compile(r"^(<!-- numbers vary -->\n)?(```[a-z]*\n\$ (gpudoctor [^\n]*)\n)(.*?)^```", re.M | re.S)
SESSION = re.compile(r"^(<!-- tmux session, (\d+) columns -->\n```\n)(.*?)^```", re.M | re.S)
EXAMPLE_WIDTH = "80"
GENERATED = {"snapshot.md": "gpudoctor.schema", "messages.md": "gpudoctor.ingest.atlas"}


class Example(NamedTuple):
    page: Path
    command: str
    shown: str
    numbers_vary: bool


def examples() -> Iterator[Example]:
    for page in PAGES:
        for match in EXAMPLE.finditer(page.read_text(encoding="utf-8")):
            yield Example(page, match.group(3), match.group(4), bool(match.group(1)))


def sessions() -> List[tuple]:
    """(columns, the session's text) of each recorded terminal session in the README."""
    return [(m.group(2), m.group(3)) for m in SESSION.finditer(PAGES[0].read_text(encoding="utf-8"))]


def normal(text: str, numbers_vary: bool = False) -> str:
    """A run as compared: the clock (the header's duration) is the one thing two runs differ in, and a real
    benchmark's numbers; everything else (counts too) is compared as printed."""
    text = re.sub(r"\d+\.\d s\n", "T s\n", text)
    if numbers_vary:
        text = re.sub(r"\d[\d,.]*", "N", re.sub(r"\b[KMG]iB\b", "XiB", text))
        text = re.sub(r" +", " ", re.sub(r"█+", "", text))
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def _kept(old: str, new: str, numbers_vary: bool = False) -> str:
    """The new run, unless it differs from the page only by the clock (or a benchmark's numbers)."""
    return old if normal(old, numbers_vary) == normal(new, numbers_vary) else new


def run_example(command: str, columns: str = EXAMPLE_WIDTH, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`gpudoctor …` run from `cwd` as a shell would, in this process (no example is about a process boundary, and
    a Python start-up per example cost a second of CPU each; the ranks of `bench` still start as processes):
    its exit code, stdout and stderr."""
    from gpudoctor.cli import main

    env = {k: v for k, v in os.environ.items()  # what the examples show depends on no variable of this shell
           if k not in ("FORCE_COLOR", "CLICOLOR_FORCE") and not k.startswith(("NCCL_", "CUDA_", "TORCH_"))}
    env.update(PYTHONPATH=str(ROOT), COLUMNS=columns, NO_COLOR="1")
    argv = shlex.split(command)[1:]
    out, err, saved, folder = io.StringIO(), io.StringIO(), dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        os.chdir(folder)
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def output(command: str, columns: str = EXAMPLE_WIDTH, cwd: Path = ROOT, exits=(0, 1)) -> str:
    """What the command prints, as a page shows it: stdout then stderr, lines without trailing blanks. A page's
    example shows a report (exit 0 or 1), never a usage error or a crash."""
    done = run_example(command, columns, cwd)
    if exits and done.returncode not in exits:
        raise RuntimeError(f"{command}: exit {done.returncode}: {done.stderr.strip()}")
    text = done.stdout + done.stderr
    return "".join(line.rstrip() + "\n" for line in text.rstrip().splitlines())


def replay(session: str, columns: str) -> str:
    """The session re-run: each `$ cd DIR` moves, each `$ gpudoctor …` shows what it prints now."""
    cwd, out = ROOT, []
    for command in re.findall(r"(?m)^\$ (.*)\n", session):
        out.append(f"$ {command}\n")
        if command.startswith("cd "):
            cwd = cwd / command[3:]
        else:
            out.append(output(command, columns, cwd, exits=()))
    return "".join(out)


def generated(name: str) -> str:
    return subprocess.run([sys.executable, "-m", GENERATED[name]], capture_output=True, text=True, check=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout


def record(page: Path) -> str:
    """The page with every example and session re-run (a generated page: regenerated)."""
    if page.name in GENERATED and page.parent.name == "docs":
        return generated(page.name)
    text = page.read_text(encoding="utf-8")
    text = EXAMPLE.sub(lambda m: f"{m.group(1) or ''}{m.group(2)}"
                       f"{_kept(m.group(4), output(m.group(3)), bool(m.group(1)))}```", text)
    return SESSION.sub(lambda m: f"{m.group(1)}{_kept(m.group(3), replay(m.group(3), m.group(2)))}```", text)


def main(argv: List[str], write: Callable[[Path, str], None] = lambda p, t: p.write_text(t, encoding="utf-8")) -> int:
    check = "--check" in argv
    stale = []
    for page in PAGES:
        new = record(page)
        if new != page.read_text(encoding="utf-8"):
            stale.append(page.relative_to(ROOT))
            if not check:
                write(page, new)
    for path in stale:
        print(f"{'stale' if check else 'recorded'}: {path}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
