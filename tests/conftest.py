import os
import sys
from pathlib import Path

import pytest

# The tests' tensors are tiny: one intra-op thread. More only spin (OpenMP's idle workers busy-wait), which on a
# loaded 2-core machine made a 4-step `bench train` cost 1 s of CPU instead of 0.03 s. Set before torch is
# imported here, and inherited by every process a test starts (the benchmark's ranks, torchrun, probes).
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
FIXTURES = ROOT / "fixtures"


def required_or_skip(variable: str, reason: str):
    """Skip with `reason`, unless the project's CI set `variable` to 1 (.ci/run does): then the test fails.

    The project's own variables, not the generic `CI` that every hosted CI sets for anyone's fork: a clone
    without what the test needs skips it, our CI can never skip it silently."""
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 requires this test to run: {reason}")
    pytest.skip(reason)


def need_corpus(path: Path = CORPUS) -> Path:
    """The corpus of real reports read in place from ../shared/corpus (never copied into the repository)."""
    if not path.exists():
        required_or_skip("GPUDOCTOR_REQUIRE_CORPUS", f"{path} is not beside the checkout")
    return path


@pytest.fixture
def corpus() -> Path:
    return need_corpus()


@pytest.fixture
def run_cli(capsys):
    """Run the CLI in-process; return (exit code, stdout, stderr)."""
    from gpudoctor.cli import main

    def run(*argv):
        code = main([str(a) for a in argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def parser_bugs_fail(monkeypatch):
    """A report parser that raises is a bug: gpudoctor turns it into a warning (the other parts still count), the
    tests that use this fixture fail on it."""
    from gpudoctor import ingest

    bugs = []

    def watched(parser):
        def parse(lines, name):
            try:
                return parser(lines, name)
            except Exception as exc:
                bugs.append(f"{parser.__module__}: {type(exc).__name__}: {exc}")
                raise
        return parse

    for kind, parser in list(ingest._PARSERS.items()):
        monkeypatch.setitem(ingest._PARSERS, kind, watched(parser))
    yield
    assert not bugs, bugs


def gpudoctor_cmd():
    return [sys.executable, "-m", "gpudoctor"]
