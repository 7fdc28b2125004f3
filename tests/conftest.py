import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = ROOT / "fixtures"


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
