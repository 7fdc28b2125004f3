"""Hostile input never hangs or crashes gpudoctor: alias bombs, endless or silent inputs, deep nesting, huge
numbers, wrong-typed snapshot fields, absurd --timeout values and catastrophic policy regexes are each bounded and,
where the input is at fault, one line and exit 2 — never an internal error (exit 3)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import subprocess
import threading
import time

import pytest
from conftest import FIXTURES, ROOT, gpudoctor_cmd

from gpudoctor import files
from gpudoctor.cli import main
from gpudoctor.policy import MATCH_TIMEOUT, compile_rule, known_groups

MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"
REPORT = FIXTURES / "reports" / "collect_env_mig.txt"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root (CI runs as root)")


def _run(*argv):
    """(exit code, stdout, stderr) of one command run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _spawn(argv, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, **kwargs)


def _error(result, *needles):
    code, _out, err = result
    _input_error(code, err, *needles)


def _input_error(code, err, *needles):
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "internal error" not in err, err
    for needle in needles:
        assert needle in err, err


# ------------------------------------------------------------------------------------------------ YAML aliases

def test_a_yaml_alias_bomb_is_read_in_linear_time(tmp_path):
    """Nine levels of nine aliases: 9^9 nodes if each alias were walked again (107 s before), 83 nodes walked."""
    lines = ["apiVersion: v1", "kind: Pod", "metadata: {name: bomb}", "a0: &a0 [" + ",".join(['"lol"'] * 9) + "]"]
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 10)]
    lines += ["spec:", "  containers:", "  - name: c", "    image: x", "    env:",
              "    - {name: NCCL_DEBUG, value: INFO}", "    extra: *a9"]
    manifest = tmp_path / "bomb.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    code, out, err = _run("lint", manifest, "--format", "json")
    assert time.monotonic() - started < 10 and code in (0, 1), err
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["GD406"]


@pytest.mark.parametrize("word", ["a", '"a', "\\a", "a~", "a=~", "'a'", "$'a'"], ids=repr)
def test_a_long_shell_word_is_read_in_linear_time(tmp_path, word):
    """One word of 256 KiB (unquoted, in quotes, escapes, tildes): joined once, not a character at a time (3.5 s
    for one unquoted word before, quadratic in its length)."""
    from gpudoctor.readers.registry import find

    path = tmp_path / "job.sh"
    text = "#!/bin/bash\nexport X=" + word * (2**18 // len(word)) + ('"' if word.startswith('"') else "") + "\n"
    started = time.process_time()  # CPU time: another process on a loaded machine does not count
    facts = find(path, text).read(path, text)
    assert time.process_time() - started < 1
    assert [assignment.name for assignment in facts.env.assignments] == ["X"]


# ------------------------------------------------------------------------------------------------ sizes, FIFOs

def _endless(tmp_path):
    """A private copy of /dev/zero: as many bytes as anyone reads."""
    node = tmp_path / "zero"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 5))
    return node


INPUT_OPTIONS = [
    ("check", "--snapshot"), ("check", "--snapshot", MACHINE, "--policy"), ("fleet",),
    ("estimate", "--model"), ("check", "--from"), ("lint",), ("check", "--snapshot", MACHINE, "--ds-config"),
]


@ROOT_ONLY
@pytest.mark.parametrize("argv", [a for a in INPUT_OPTIONS if a != ("check", "--from")],  # a log streams, unbounded
                         ids=lambda a: " ".join(map(str, a)))
def test_an_endless_input_stops_at_its_size_limit(tmp_path, argv):
    code, out, err = _run(*argv, _endless(tmp_path))
    _bounded(argv, code, out, err, "larger than")


def _bounded(argv, code, out, err, reason):
    """Options that read any file name the reason; the others accept only regular files and say so."""
    if argv[-1] in ("--snapshot", "--policy", "--from", "fleet"):
        _input_error(code, err, reason)
    elif code == 1:  # an unreadable file as a finding (GD003)
        assert "GD003" in out and "internal error" not in err
    else:
        _input_error(code, err)


@pytest.mark.parametrize("argv", INPUT_OPTIONS, ids=lambda a: " ".join(map(str, a)))
def test_a_fifo_nobody_writes_is_given_up(tmp_path, monkeypatch, argv):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "FIRST_BYTE_DEADLINE", 0.3)
    started = time.monotonic()
    code, out, err = _run(*argv, fifo)
    assert time.monotonic() - started < 20
    _bounded(argv, code, out, err, "no data within")


def test_a_fifo_that_delivers_is_read(tmp_path, monkeypatch):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(MACHINE.read_bytes()))
    writer.start()
    code, out, err = _run("check", "--snapshot", fifo, "--format", "json")
    writer.join(10)
    assert code in (0, 1) and json.loads(out)["schema"] == "gpudoctor.report/1", err


def test_an_endless_device_is_cut_at_the_size_cap(tmp_path, monkeypatch):
    """`--from` a link to /dev/zero or /dev/urandom ends: the streamed input has a size cap."""
    monkeypatch.setattr(files, "STREAM_MAX_BYTES", 2 ** 20)
    for device in ("/dev/zero", "/dev/urandom"):
        link = tmp_path / os.path.basename(device)
        link.symlink_to(device)
        _error(_run("check", "--from", link), "larger than 1 MiB")


def test_silent_stdin_is_one_line_and_exit_2(monkeypatch):
    monkeypatch.setattr(files, "FIRST_BYTE_DEADLINE", 0.2)
    read_end, write_end = os.pipe()
    try:
        with open(read_end, "rb", closefd=False) as stdin:
            monkeypatch.setattr("sys.stdin", io.TextIOWrapper(stdin))
            _error(_run("check", "--from", "-"), "no data within 0.2 s")
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_writer_that_stalls_after_one_line_is_given_up(tmp_path, monkeypatch):
    """One deadline for the whole read, not only for the first byte."""
    monkeypatch.setattr(files, "STREAM_DEADLINE", 0.5)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    done = threading.Event()

    def writer():
        with open(fifo, "w") as handle:
            handle.write(REPORT.read_text().splitlines()[0] + "\n")
            handle.flush()
            done.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        _error(_run("check", "--from", fifo), "not finished within 0.5 s")
    finally:
        done.set()
        thread.join(10)


@pytest.mark.slow
def test_process_substitution_and_stdin_pipes_stream():
    slow = f"(sleep 1; cat {REPORT})"
    done = _spawn(["bash", "-c", f"{' '.join(gpudoctor_cmd())} check --from <{slow} --format json --fail-on never"])
    assert done.returncode == 0 and json.loads(done.stdout)["source"]["kind"] == "report", done.stderr
    piped = _spawn(["bash", "-c", f"{slow} | {' '.join(gpudoctor_cmd())} check --from - --format json "
                                  "--fail-on never"])
    assert piped.returncode == 0 and json.loads(piped.stdout)["source"]["kind"] == "report", piped.stderr


def test_a_directory_is_an_input_error(tmp_path):
    for argv in (("check", "--snapshot"), ("check", "--snapshot", MACHINE, "--policy"), ("estimate", "--model"),
                 ("check", "--from")):
        code, _out, err = _run(*argv, tmp_path)
        _input_error(code, err)


# ------------------------------------------------------------------------------------------------ nesting, numbers

def test_deep_nesting_is_an_input_error(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    toml = tmp_path / "deep.toml"
    toml.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    _error(_run("check", "--snapshot", deep), "nested too deeply")
    _error(_run("check", "--snapshot", MACHINE, "--policy", toml), "nested too deeply")
    _error(_run("estimate", "--model", deep), "nested too deeply")
    snapshot = json.loads(MACHINE.read_text())
    snapshot["facts"]["extra"] = json.loads("[" * 500 + "]" * 500)
    within = tmp_path / "within.json"
    within.write_text(json.dumps(snapshot))
    _error(_run("check", "--snapshot", within), "facts.extra", "nested deeper than")


def test_huge_numbers_are_input_errors(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 1%s, "num_hidden_layers": 2, "vocab_size": 10, "num_attention_heads": 2}'
                      % ("0" * 300))
    _error(_run("estimate", "--model", config), "hidden_size", "not a model dimension")
    for value in ("1" + "0" * 300, "1e400", "NaN"):
        text = MACHINE.read_text().replace('"shm_bytes": ', f'"shm_bytes": {value}, "was": ', 1)
        path = tmp_path / "snap.json"
        path.write_text(text)
        _error(_run("check", "--snapshot", path), "facts.host.shm_bytes")


# ------------------------------------------------------------------------------------------------ snapshot types

WRONG_TYPES = [
    (("host",), "x", "facts.host is a string, expected an object"),
    (("nvml", "gpus", 0, "memory_total_bytes"), "x", "facts.nvml.gpus[0].memory_total_bytes is a string"),
    (("nvml", "gpus"), {"a": 1}, "facts.nvml.gpus is an object, expected list"),
    (("torch", "version"), 2.5, "facts.torch.version is a number, expected str"),
    (("env",), ["NCCL_DEBUG=INFO"], "facts.env is an array"),
    (("env", "NCCL_DEBUG"), 1, "facts.env.NCCL_DEBUG is an integer, expected str"),
]


@pytest.mark.parametrize("keys,value,message", WRONG_TYPES, ids=lambda v: str(v)[:30])
@pytest.mark.parametrize("fmt", ["plain", "json", "markdown", "prometheus"])
def test_a_snapshot_field_of_the_wrong_type_is_exit_2_naming_it(tmp_path, keys, value, message, fmt):
    data = json.loads(MACHINE.read_text())
    node = data["facts"]
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    _error(_run("check", "--snapshot", path, "--format", fmt), str(path), message)
    _error(_run("fleet", path, MACHINE), message)


# ------------------------------------------------------------------------------------------------ --timeout

@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "0", "-1", "abc"])
def test_absurd_timeouts_are_usage_errors(value):
    _error(_run("check", "--snapshot", MACHINE, "--timeout", value), "--timeout")


# ------------------------------------------------------------------------------------------------ policy regex

def _matches_rule(pattern):
    return compile_rule({"id": "SITE900", "severity": "error", "message": "fired",
                         "forbid": {"fact": "env.NCCL_IB_HCA", "op": "matches", "value": pattern}}, known_groups())


def _evaluate(rule, value):
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    return evaluate(Snapshot(facts={"env": {"NCCL_IB_HCA": value}}), [rule])


def test_a_nested_quantifier_does_not_backtrack_for_minutes():
    started = time.monotonic()
    report = _evaluate(_matches_rule(r"^(\w+\s?)*$"), "a" * 4000 + "!")
    assert time.monotonic() - started < 5 and not report.findings and not report.unknown


def test_a_pattern_that_runs_out_of_time_makes_the_rule_unknown_with_the_reason():
    started = time.monotonic()
    report = _evaluate(_matches_rule(r"(.*?,){40}X"), "a," * 2000)
    assert time.monotonic() - started < MATCH_TIMEOUT * 20
    assert not report.findings and [u.rule for u in report.unknown] == ["SITE900"]
    assert "ran past" in report.unknown[0].missing


# ------------------------------------------------------------------------------------------------ per-format bounds

def _over_bound(fmt):
    """A file of `fmt` one byte over its bound: `# x…` comment lines, which every format reads as a comment."""
    name = {"ncclconf": "nccl.conf", "dockerfile": "Dockerfile", "python": "train.py", "yaml": "pod.yaml",
            "shell": "job.sh", "dotenv": "job.env", "ds_config": "ds_config.json",
            "config-yaml": "config.yaml"}[fmt.name]
    head = {"dockerfile": "FROM x\n", "python": "import os\n", "yaml": "kind: Pod\n", "shell": "#!/bin/bash\n",
            "ds_config": '{"train_batch_size": 1, "x": "'}.get(fmt.name, "")
    filler = "a" if fmt.name == "ds_config" else "# x\n"
    tail = '"}' if fmt.name == "ds_config" else ""
    body = filler * ((fmt.max_bytes + 1 - len(head) - len(tail)) // len(filler) + 1)
    return name, head + body + tail


def test_a_file_over_its_formats_bound_is_one_line_and_exit_2_named_and_said_in_a_folder(tmp_path):
    """Each job-file format has a measured bound (benchmarks/reader_bounds.py --at-bounds): past it, a file named
    on the command line is one line and exit 2; one met in a folder is said (info), the rest still read."""
    from gpudoctor.readers.registry import FORMATS, find, named

    for fmt in FORMATS:
        name, text = _over_bound(fmt)
        folder = tmp_path / fmt.name
        folder.mkdir()
        path = folder / name
        path.write_text(text)
        assert find(path, text) is fmt, fmt.name
        _error(_run("lint", path), f"a {fmt.what} of ", "gpudoctor's limit for this input")
        path.write_text(text[:fmt.max_bytes - 200] + ("\n" if fmt.name != "ds_config" else '"}'))
        assert _run("lint", path)[0] in (0, 1), fmt.name  # within the bound: read
    name, text = _over_bound(named("shell"))
    (tmp_path / "shell" / name).write_text(text)
    (tmp_path / "shell" / "job.env").write_text("NCCL_DEBUG=INFO\n")
    code, out, err = _run("lint", tmp_path / "shell", "--format", "json")
    found = {(f["rule"], f["severity"]) for f in json.loads(out)["findings"]}
    assert ("GD003", "info") in found and "GD406" in {rule for rule, _ in found}, found


def test_a_python_script_is_bounded_by_its_syntax_nodes_not_only_its_bytes(tmp_path):
    """A statement every four bytes is the Python reader's slowest shape: past MAX_NODES it is refused in one line,
    while a long script of the usual density (about one node per ten bytes) is read whole."""
    from gpudoctor.readers.python import MAX_NODES

    dense = tmp_path / "dense.py"
    dense.write_text("import os\n" + "x=1\n" * (MAX_NODES // 4 + 1))
    _error(_run("lint", dense), f"more than {MAX_NODES:,}", "gpudoctor's limit for this input")
    function = ('def step_{i}(model, batch, optimizer):\n    """One step of the training loop, as a script has it."""\n'
                '    loss = model(**batch).loss / batch["input_ids"].shape[0]\n    loss.backward()\n'
                '    optimizer.step()\n    return loss.item()\n\n\n')
    usual = tmp_path / "train.py"
    usual.write_text("import torch\n\n" + "".join(function.format(i=i) for i in range(1500)))
    assert usual.stat().st_size > 300 * 1024
    assert _run("lint", usual)[0] == 0


@pytest.mark.parametrize("text,name", [("A=1\n" * 10_001, "job.env"), ("bad line\n" * 10_001, "job.env"),
                                       ("FROM x\nENV " + "A=1 " * 10_001 + "\n", "Dockerfile")], ids=repr)
def test_a_file_with_more_than_10000_settings_is_refused(tmp_path, text, name):
    """The rules' time grows with the variables a file sets and the lines it cannot parse: 10,000 at most."""
    path = tmp_path / name
    path.write_text(text)
    _error(_run("lint", path), "10,001 variable settings and lines it cannot parse", "more than 10,000")
    _error(_run("check", "--snapshot", MACHINE, "--env-file", path), "more than 10,000")


def test_a_snapshot_with_more_than_20000_entries_in_a_field_is_refused(tmp_path):
    data = json.loads(MACHINE.read_text())
    data["facts"]["env"].update({f"V{i}": "x" for i in range(20_001)})
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps(data))
    _error(_run("check", "--snapshot", snapshot), "facts.env has 20,0", "more than 20,000")


def test_a_value_met_again_is_made_printable_once():
    """printable_data copies a value met again (the verdicts a fleet's nodes share) once: one copy, escaped."""
    from gpudoctor.model import NotApplicable
    from gpudoctor.render.printable import printable_data

    shared = NotApplicable("GD999", "no \x1b[31mscript")
    seen = printable_data([shared, {"reason": shared}, (shared, "\x1b]0;x\x07")])
    assert seen[0] is seen[1]["reason"] is seen[2][0] and seen[0] is not shared
    assert seen[0].reason == "no \\x1b[31mscript" and seen[2][1] == "\\x1b]0;x\\x07"
