import contextlib
import copy
import dataclasses
import io
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pytest

# The tests' tensors are tiny: one intra-op thread. More only spin (OpenMP's idle workers busy-wait), which on a
# loaded 2-core machine made a 4-step `bench train` cost 1 s of CPU instead of 0.03 s. Set before torch is
# imported here, and inherited by every process a test starts (the benchmark's ranks, torchrun, probes).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# gpudoctor's parse cache of its rule files (gpudoctor.data.cache_dir): the suite's own, not the user's ~/.cache
os.environ.setdefault("GPUDOCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="gpudoctor-test-cache-"))
# Every read of a fact path or a record's key that rules/facts.toml does not declare raises (gpudoctor.facts.contract),
# here and in every gpudoctor process a test starts.
os.environ["GPUDOCTOR_STRICT_FACTS"] = "1"

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


def cli_in_process(*args, cwd=ROOT, env=None) -> subprocess.CompletedProcess:
    """`gpudoctor ARGS` in this process, as run from `cwd` with `env` added to the environment (a value None:
    unset): exit code, stdout and stderr, like subprocess.run's, for tests that shared a subprocess helper."""
    from gpudoctor.cli import main

    argv = [str(arg) for arg in args]
    out, err, folder = io.StringIO(), io.StringIO(), os.getcwd()
    with mock.patch.dict(os.environ), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for name, value in (env or {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.chdir(cwd)
        try:
            code = main(argv)
        finally:
            os.chdir(folder)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.fixture(autouse=True)
def _environment_restored():
    """Each test gets the environment back as it was: code under test that exports launcher variables in this
    process (bench under srun sets RANK, WORLD_SIZE, MASTER_ADDR for env://) leaves nothing for the next test."""
    raw = os.environ._data.copy()  # its encoded mapping: a copy and a comparison cost a microsecond, where clearing
    yield                          # and refilling os.environ around every test cost a millisecond
    if os.environ._data != raw:
        saved = {os.environ.decodekey(name): os.environ.decodevalue(value) for name, value in raw.items()}
        for name in [name for name in os.environ if name not in saved]:
            del os.environ[name]
        for name, value in saved.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


_PROBED: dict = {}


@pytest.fixture
def probes_once(monkeypatch):
    """The live probes of this machine (each a real child process, one of them importing torch) run once per test
    session for a given interpreter, mode and environment, and each later run gets a copy of what they found: for
    tests that read this machine's facts without being about how a probe gathers them. A probe that failed or timed
    out runs again."""
    from gpudoctor import probes

    every = probes.all_probes

    def once(probe):
        def run(ctx):
            key = (probe.name, ctx.python, ctx.quick,
                   tuple(sorted(item for item in ctx.environ.items() if item[0] != "PYTEST_CURRENT_TEST")))
            if key not in _PROBED:
                _PROBED[key] = probe.run(ctx)
            return copy.deepcopy(_PROBED[key])
        return dataclasses.replace(probe, run=run)

    monkeypatch.setattr(probes, "all_probes",
                        lambda names=None: {name: once(probe) for name, probe in every(names).items()})


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
    from gpudoctor.ingest.registry import FORMATS

    bugs = []

    def watched(parser):
        def parse(lines, name):
            try:
                return parser(lines, name)
            except Exception as exc:
                bugs.append(f"{parser.__module__}: {type(exc).__name__}: {exc}")
                raise
        return parse

    for fmt in FORMATS:
        parser = fmt.parser()
        monkeypatch.setattr(sys.modules[parser.__module__], parser.__name__, watched(parser))
    yield
    assert not bugs, bugs


def gpudoctor_cmd():
    return [sys.executable, "-m", "gpudoctor"]


# --- the suite's budget: under 4 minutes on a 2-core machine ------------------------------------------------------
# CPU time (the test's own and its children's, the ranks and commands it started) is what a loaded machine does not
# change; the tests over SLOW_TEST_CPU_S are listed at the end of every run, with the suite's total.
SLOW_TEST_CPU_S = 3.0
_spent: list = []


def _cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    began = _cpu_seconds()
    yield
    _spent.append((_cpu_seconds() - began, item.nodeid))


def pytest_terminal_summary(terminalreporter):
    if not _spent:
        return
    slow = sorted((entry for entry in _spent if entry[0] > SLOW_TEST_CPU_S), reverse=True)
    terminalreporter.section("CPU budget")
    terminalreporter.write_line(f"{sum(cpu for cpu, _ in _spent):.0f} s of CPU in {len(_spent)} tests (the whole "
                                f"suite's budget: 4 minutes on 2 cores); over {SLOW_TEST_CPU_S:g} s each: "
                                f"{len(slow) or 'none'}")
    for cpu, nodeid in slow:
        terminalreporter.write_line(f"{cpu:7.1f} s  {nodeid}")
