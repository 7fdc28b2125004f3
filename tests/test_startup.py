"""What every run pays before its first fact: the command line imports only the command it runs, the probes' children
start before the judging modules load, a child's exit is seen at once, and a program with nothing left to run at
exit leaves without tearing the interpreter down."""

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
from conftest import FIXTURES, ROOT

from gpudoctor.cli import COMMANDS, build_parser, named_command
from gpudoctor.probes import command


def _python(code: str, *args: str, cwd=ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120)


def _subcommands(parser: argparse.ArgumentParser) -> dict:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_word_of_commands_is_a_command_of_the_parser_and_back():
    assert list(_subcommands(build_parser())) == list(COMMANDS)


def test_a_command_alone_gets_the_parser_it_has_among_all_of_them():
    for word in COMMANDS:
        alone, among = _subcommands(build_parser(word))[word], _subcommands(build_parser())[word]
        assert alone.format_help() == among.format_help(), word


def test_the_command_named_is_the_first_word_that_is_not_an_option():
    assert named_command(["--debug", "check", "--select", "fix"]) == "check"
    assert named_command(["explain", "GD101"]) == "explain"
    assert named_command(["chek"]) is None and named_command(["--version"]) is None and named_command([]) is None
    assert named_command(["--help", "check"]) is None and named_command(["check", "--help"]) == "check"


# The modules a live `check` must not import before its probes start (they load while the probes' children run),
# and those it never needs: another command, the TOML parser where the parse cache answers, OpenSSL's hashes, the
# memory estimate without --model, and on Linux platform's regexes and psutil (what the host probe reads with it is
# read directly).
JUDGING = ("gpudoctor.engine", "gpudoctor.verdict", "gpudoctor.checks.memory", "gpudoctor.render.json_report")
NEVER = ("gpudoctor.cli.bench", "gpudoctor.cli.preflight", "gpudoctor.cli.lint", "gpudoctor.fleet", "tomllib",
         "_hashlib", "statistics", "traceback", "gpudoctor.estimate", "gpudoctor.remedies", "platform", "difflib",
         "psutil")


def test_a_live_check_starts_its_probes_before_it_loads_what_judges(tmp_path):
    """After a first run has filled the parse cache of the rule data, as every run after installing does."""
    warm = [sys.executable, "-m", "gpudoctor", "check", "--select", "GD105,GD5", "--format", "json"]
    subprocess.run(warm, capture_output=True, cwd=tmp_path, timeout=120, check=False)
    done = _python("""
        import json, sys
        import gpudoctor.probes as probes
        started = probes.run_probes
        def run_probes(*args, **kwargs):
            print(json.dumps(sorted(sys.modules)), file=sys.stderr)
            return started(*args, **kwargs)
        probes.run_probes = run_probes
        from gpudoctor.cli import main
        code = main(["check", "--select", "GD105,GD5", "--format", "json", "-o", sys.argv[1]])
        print(json.dumps(sorted(sys.modules)))
        raise SystemExit(code)
        """, str(tmp_path / "report.json"), cwd=tmp_path)  # no pyproject.toml above it: no TOML to parse
    assert done.returncode in (0, 1), done.stderr
    before, after = json.loads(done.stderr.splitlines()[-1]), set(json.loads(done.stdout))
    assert not [name for name in JUDGING if name in before]
    assert all(name in after for name in JUDGING)
    assert not [name for name in NEVER if name in after]
    assert json.loads((tmp_path / "report.json").read_text())["schema"] == "gpudoctor.report/1"


def test_the_children_found_in_proc_are_those_psutil_finds():
    sleepers = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    try:
        assert command._child_pids() == {child.pid for child in psutil.Process().children()}
        assert {s.pid for s in sleepers} <= command._child_pids()
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()


def test_a_childs_exit_is_seen_without_polling(monkeypatch):
    """Popen.wait with a timeout sleeps up to 50 ms between looks: run_command waits on the child's pidfd instead,
    and asks Popen only once, when the child has exited."""
    waits = []
    original = subprocess.Popen.wait

    def wait(self, timeout=None):
        waits.append(self.poll())  # None: still running, so Popen would poll
        return original(self, timeout)

    monkeypatch.setattr(subprocess.Popen, "wait", wait)
    result = command.run_command(["sh", "-c", "sleep 0.2; echo done"], timeout=10)
    assert result.stdout == "done\n"
    assert waits and all(code is not None for code in waits)


def test_a_child_past_its_time_is_killed_all_the_same():
    try:
        command.run_command(["sleep", "30"], timeout=0.3)
    except command.CommandTimeout as exc:
        assert "did not finish within 0.3 s" in str(exc)
    else:
        raise AssertionError("no timeout")


def test_the_program_runs_the_exit_handlers_it_was_given():
    """Leaving without tearing the interpreter down is only for a process with nothing left to run at exit."""
    done = _python("""
        import atexit, sys
        atexit.register(lambda: print("handler ran", flush=True))
        sys.argv = ["gpudoctor", "explain", "GD101", "--format", "json"]
        from gpudoctor.cli import main
        raise SystemExit(main())
        """)
    assert done.returncode == 0 and done.stdout.rstrip().endswith("handler ran")


def test_the_program_alone_lets_the_garbage_collector_wait():
    """The program (the console script, `python -m`) raises the collector's threshold while everything it loads is
    made; a caller that imports gpudoctor keeps its own, and a bench worker's re-import of __main__ runs nothing."""
    done = _python("""
        import gc
        import gpudoctor.__main__, gpudoctor.cli
        print(gc.get_threshold()[0], "gpudoctor.cli" in __import__("sys").modules)
        gpudoctor.cli.main = lambda: print(gc.get_threshold()[0]) or 0
        raise SystemExit(gpudoctor.__main__.program())
        """)
    assert done.returncode == 0 and done.stdout.split() == ["700", "True", "50000"], done.stderr
    reimported = _python("""
        import gc, sys, runpy
        runpy.run_module("gpudoctor.__main__", run_name="__mp_main__")
        print(gc.get_threshold()[0], "gpudoctor.cli" in sys.modules)
        """)
    assert reimported.stdout.split() == ["700", "False"], reimported.stderr


def test_the_program_leaving_at_once_writes_all_its_output():
    snapshot = FIXTURES / "machines" / "h100x8-healthy.json"
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "--snapshot", str(snapshot), "--format",
                           "json"], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={**os.environ, "COLUMNS": "80"})
    assert done.returncode == 0 and json.loads(done.stdout)["schema"] == "gpudoctor.report/1"


def test_the_callers_work_waits_for_the_probes_children_to_start(monkeypatch):
    """A probe's child starts before the caller's own work takes the interpreter (run_probes' `meanwhile`), the
    longest first; a probe that works in this process holds nothing back, and one whose child never comes holds
    the caller's work back at most LAUNCH_WAIT_S."""
    from gpudoctor import probes as probing
    from gpudoctor.probes import Probe, ProbeContext, run_probes

    monkeypatch.setattr(probing, "LAUNCH_WAIT_S", 5.0)  # however busy the machine, the children start first

    def child_after_a_while(ctx):
        time.sleep(0.05)  # what a probe does before its child: a file looked up, a path resolved
        command.run_command(["sleep", "0.3"], ctx.timeout)
        return {"a": {}}

    def long_pole(ctx):
        command.run_command(["sleep", "0.31"], ctx.timeout)
        return {"b": {}}

    def in_process(ctx):
        time.sleep(0.8)
        return {"c": {}}

    seen = {}

    def meanwhile():
        seen["children"] = [process.args[1] for process in command._started.values()]
        seen["after"] = time.monotonic() - began

    probes = [Probe("a", child_after_a_while, starts_child=True), Probe("c", in_process),
              Probe("b", long_pole, starts_child=True, long_pole=True)]
    began = time.monotonic()
    facts, results = run_probes(probes, ProbeContext(timeout=10), meanwhile)
    assert seen["children"] == ["0.31", "0.3"]
    assert 0.05 <= seen["after"] < 0.7  # not the 0.8 s of the probe that works in this process
    assert [result.name for result in results] == ["a", "c", "b"] and all(r.status == "ok" for r in results)

    monkeypatch.setattr(probing, "LAUNCH_WAIT_S", 0.1)
    seen.clear()
    began = time.monotonic()
    run_probes([Probe("late", in_process, starts_child=True)], ProbeContext(timeout=10), meanwhile)
    assert 0.1 <= seen["after"] < 0.7 and seen["children"] == []
