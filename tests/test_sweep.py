"""The hostile-input sweep's classes, each a parametrised test run in-process: empty and odd paths, bad flag
values, wrong-shaped snapshots and untrusted text reaching the terminal — each one line and exit 2 (or escaped),
never the live host, the current folder, a hang or an internal error (exit 3)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT, gpudoctor_cmd

from gpudoctor.cli import main

MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"


def _run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _usage_error(argv, *needles):
    code, out, err = _run(*argv)
    assert code == 2 and not out and len(err.strip().splitlines()) == 1, (code, out, err)
    assert "internal error" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize("argv", [
    ("check", "--snapshot", ""), ("fleet", ""), ("lint", ""), ("check", "--snapshot", MACHINE, "--ds-config", ""),
    ("check", "--snapshot", MACHINE, "--policy", ""), ("fix", "--snapshot", MACHINE, "--write-env", ""),
    ("estimate", "--model", ""), ("check", "--from", ""), ("check", "--snapshot", MACHINE, "--env-file", ""),
    ("check", "--snapshot", MACHINE, "--script", ""), ("snapshot", "--from", MACHINE, "--output", ""),
    ("check", "--python", ""),
], ids=lambda argv: " ".join(map(str, argv)))
def test_an_empty_path_is_a_usage_error(argv):
    """Never the live host, the current folder, or a flag silently ignored."""
    _usage_error(argv, "an empty path")


@pytest.mark.parametrize("argv,needle", [
    (("estimate", "--model", "9" * 400), "neither a size"),
    (("bench", "train", "--heads", "0"), "must be positive"),
    (("bench", "train", "--hidden", "-1"), "must be positive"),
    (("bench", "train", "--lr", "nan"), "finite number above 0"),
    (("bench", "train", "--lr", "inf"), "finite number above 0"),
    (("bench", "nccl", "--min-busbw", "nan"), "finite number above 0"),
    (("bench", "nccl", "--min-busbw", "inf"), "finite number above 0"),
    (("bench", "nccl", "--min-busbw", "-3"), "finite number above 0"),
], ids=lambda value: " ".join(map(str, value))[:40] if isinstance(value, tuple) else "")
def test_a_bad_flag_value_is_a_usage_error(argv, needle):
    _usage_error(argv, needle)


@pytest.mark.parametrize("gpu", [[], None, "x", 3], ids=repr)
@pytest.mark.parametrize("fmt", ["plain", "json", "markdown"])
def test_a_snapshot_gpu_that_is_not_an_object_is_refused(tmp_path, gpu, fmt):
    data = json.loads(MACHINE.read_text())
    data["facts"]["nvml"]["gpus"][0] = gpu
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps(data))
    _usage_error(("check", "--snapshot", snapshot, "--format", fmt), "facts.nvml.gpus[0] is ", "expected an object")
    _usage_error(("fleet", snapshot, MACHINE, "--format", fmt if fmt != "markdown" else "plain"),
                 "facts.nvml.gpus[0] is ")


CONTROLS = ["\x1b[2J", "\x1b]0;title\x07", "\x1bc", "\r", "\u202e", "\x9b31m"]
ODD_NAMES = ["a\x1b[2Jb.env", "t\x1b]0;x\x07.env", "cr\rx.env", "rtl\u202egpj.env", "new\nline.env"]


def _no_controls(text: str) -> None:
    assert not [c for c in CONTROLS + ["\n".join(["line.env", ""])] if c in text.replace("\r\n", "\n")], repr(text)


@pytest.mark.parametrize("name", ODD_NAMES, ids=repr)
@pytest.mark.parametrize("fmt", ["plain", "rich", "markdown"])
def test_odd_file_names_reach_the_terminal_escaped(tmp_path, name, fmt):
    (tmp_path / name).write_text("NCCL_DEBUG=INFO\n")
    code, out, err = _run("lint", tmp_path, "--format", fmt)
    assert "GD406" in out
    _no_controls(out + err)
    code, out, err = _run("lint", tmp_path / name, "--format", fmt)
    _no_controls(out + err)


@pytest.mark.parametrize("name", ODD_NAMES, ids=repr)
def test_odd_names_in_error_lines_and_wrote_are_escaped(tmp_path, name):
    err = _usage_error(("check", "--snapshot", MACHINE, "--policy", tmp_path / name))
    _no_controls(err)
    (tmp_path / name).write_text("NCCL_DEBUG=INFO\n")
    code, out, err = _run("fix", "--snapshot", MACHINE, "--write-env", tmp_path / name)
    assert "Wrote" in out
    _no_controls(out + err)


@pytest.mark.parametrize("control", CONTROLS, ids=repr)
@pytest.mark.parametrize("fmt", ["plain", "markdown"])
def test_snapshot_values_reach_the_terminal_escaped(tmp_path, control, fmt):
    data = json.loads(MACHINE.read_text())
    data["facts"]["torch"]["version"] = f"{control}2.1.0+cu121"
    data["facts"]["host"]["hostname"] = f"node{control}1"
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(json.dumps(data))
    _code, out, err = _run("check", "--snapshot", snapshot, "--format", fmt)
    _no_controls(out + err)
    _code, out, err = _run("fleet", snapshot, MACHINE, "--format", "plain")
    _no_controls(out + err)


LAUNCHER_FAULTS = [
    ({"RANK": "5", "WORLD_SIZE": "2"}, "ranks run from 0 to 1"),
    ({"RANK": "-1", "WORLD_SIZE": "2"}, "ranks run from 0 to 1"),
    ({"RANK": "0", "WORLD_SIZE": "0"}, "at least 1 rank"),
    ({"RANK": "0", "WORLD_SIZE": "abc"}, "WORLD_SIZE='abc' is not a whole number"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "abc"}, "MASTER_PORT='abc' is not a whole number"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "70000"}, "a TCP port is 1 to 65535"),
    ({"WORLD_SIZE": "2"}, "but RANK is not"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": ""}, "but MASTER_ADDR is not"),
    ({"RANK": " 1", "WORLD_SIZE": "2"}, "RANK=' 1' is not a whole number"),
    ({"RANK": "\u0661", "WORLD_SIZE": "2"}, "is not a whole number (ASCII digits"),  # ARABIC-INDIC DIGIT ONE
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "node1\nnode2"}, "'node1\\nnode2' is not a host name"),
    ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "29500\n"}, "is not a whole number"),
]


@pytest.mark.parametrize("command", [("check", "--fleet", "--quick"), ("bench", "nccl")], ids=" ".join)
@pytest.mark.parametrize("env,needle", LAUNCHER_FAULTS, ids=lambda v: " ".join(f"{k}={x}" for k, x in v.items())
                         if isinstance(v, dict) else "")
def test_launcher_variables_are_checked_before_any_rendezvous(monkeypatch, command, env, needle):
    """One validation for `check --fleet` and `bench nccl`: one line, exit 2, nothing waited for."""
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    _usage_error(command, needle)


@pytest.mark.slow
def test_rank_0_without_peers_is_bounded_by_timeout(monkeypatch):
    pytest.importorskip("torch")
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    _usage_error(("check", "--fleet", "--quick", "--timeout", "0.5"),
                 "could not reach the others within 2 s (no answer)")


@pytest.mark.parametrize("part", ["a", " a\t", '"\\""', '"a\\\\"', "'a'", '"\\u0041"', "1"], ids=repr)
@pytest.mark.parametrize("form", ["{} = 1", "[{}]", "x = {{ {} = 1 }}"])
def test_a_policy_with_a_100000_part_dotted_key_is_refused_before_parsing(tmp_path, part, form):
    """tomllib would need gigabytes for it (quadratic in the parts): the key depth is bounded before the parser
    sees the text, whatever the parts are (escaped quotes in a quoted part included)."""
    policy = tmp_path / "site.toml"
    policy.write_text('schema = "gpudoctor.policy/1"\n' + form.format(".".join([part] * 100000)) + "\n")
    _usage_error(("check", "--snapshot", MACHINE, "--policy", policy), "a dotted key of more than 64 parts")


def _launched(monkeypatch, rank: str, port: int) -> None:
    for name in ("LOCAL_RANK", "SLURM_PROCID", "TORCHELASTIC_USE_AGENT_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))


@pytest.mark.parametrize("command", [("check", "--fleet", "--quick"), ("bench", "nccl")], ids=" ".join)
def test_rank_0_on_a_port_another_process_holds_is_refused_before_any_rendezvous(monkeypatch, command):
    """Rank 0 starts the store on MASTER_PORT: a port another process listens on is one line and exit 2 at once
    (under torchrun's agent store rank 0 only connects to it, so there it is no error)."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        _launched(monkeypatch, "0", held.getsockname()[1])
        _usage_error(command, f"MASTER_PORT={held.getsockname()[1]} is in use by another process")
        from gpudoctor.rendezvous import launched_rank

        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
        assert launched_rank("check --fleet").rank == 0


@pytest.mark.slow
@pytest.mark.parametrize("rank,silent", [("0", False), ("1", False), ("1", True)],
                         ids=["missing peer", "unreachable master", "a port that is not a store"])
def test_bench_nccl_rendezvous_is_bounded_by_timeout(monkeypatch, rank, silent):
    """A real gloo rendezvous that cannot complete ends within --timeout: one line, exit 2 — also when MASTER_PORT
    is a socket that accepts and never answers (torch's client would wait on it without a bound)."""
    pytest.importorskip("torch")
    import socket
    import time

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        if silent:
            listener.listen()
        port = listener.getsockname()[1]
        if not silent:
            listener.close()
        _launched(monkeypatch, rank, port)
        started = time.monotonic()
        _usage_error(("bench", "nccl", "--backend", "gloo", "--timeout", "2", "-e", "8"), "could not reach the others")
        assert time.monotonic() - started < 30


@pytest.mark.parametrize("command", [("check", "--fleet", "--quick"), ("bench", "nccl")], ids=" ".join)
def test_srun_without_master_addr_is_a_usage_error_for_every_command(monkeypatch, command):
    """`bench nccl` said it in one line but exited 1; both commands use one validation now: exit 2."""
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST"):
        monkeypatch.delenv(name, raising=False)
    for name, value in dict(SLURM_PROCID="0", SLURM_STEP_NUM_TASKS="2", SLURM_STEP_ID="0").items():
        monkeypatch.setenv(name, value)
    _usage_error(command, "under srun but MASTER_ADDR is not set")


# ---- real ranks (gloo on this machine) that fail in every way a rendezvous can: one line and exit 2 each ----------

RANK_BOUND_S = 90  # a gpudoctor rank ends within this (each step waits 2 s; the rest is starting torch under load)


def _ranks_env(port: int, **extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_", "MASTER_", "SLURM_", "TORCHELASTIC_", "TORCH_CPP"))}
    return dict(env, PYTHONPATH=str(ROOT), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), **extra)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _meet(ranks: list) -> list:
    """Start every rank at once (argv, env); (exit code, stdout, stderr) of each gpudoctor rank once it ended.
    A fake peer (tests/rendezvous_peer.py) is killed when the gpudoctor ranks are done."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
             for argv, env in ranks]
    try:
        ours = [proc for proc, (argv, _) in zip(procs, ranks) if argv[:3] == gpudoctor_cmd()]
        said = [proc.communicate(timeout=RANK_BOUND_S) for proc in ours]
        return [(proc.returncode, out, err) for proc, (out, err) in zip(ours, said)]
    finally:
        for proc in procs:
            proc.kill()
            proc.communicate()


def _one_line_exit_2(result, *needles) -> str:
    """Exit 2 (never 134, SIGABRT; never 3), nothing on stdout, one line on stderr: no c10d ERROR line, no C++
    frames, no "terminate called"."""
    code, out, err = result
    assert code == 2 and out == "" and len(err.splitlines()) == 1, (code, out, err)
    for needle in needles:
        assert needle in err, err
    return err


PEER = [sys.executable, str(ROOT / "tests" / "rendezvous_peer.py")]
FLEET = gpudoctor_cmd() + ["check", "--fleet", "--quick", "--timeout", "0.5"]


@pytest.mark.slow
@pytest.mark.parametrize("peer,needle", [
    ("die", "check --fleet: rank 0 could not announce the size of its snapshot within 2 s"),
    ("announce:67108864", "check --fleet: rank 1 announced its snapshot as 67,108,864 bytes; gpudoctor takes 1 byte "
                          "to 20 MiB"),
    ("announce:-5", "check --fleet: rank 1 announced its snapshot as -5 bytes"),
    ("send:deep", "check --fleet: rank 1 sent JSON nested too deeply as its snapshot"),
    ("send:pickle", "check --fleet: rank 1 sent something that is not JSON as its snapshot"),
], ids=["peer dies", "64 MiB announced", "negative length", "50,000 deep", "a pickle"])
def test_check_fleet_with_a_peer_that_dies_or_sends_garbage(peer, needle):
    """Rank 0 against a fake rank 1: a peer gone after joining, a 64 MiB or negative length announced (refused
    before anything is allocated or read), JSON 50,000 deep, a pickle: one line naming the rank, exit 2."""
    pytest.importorskip("torch.distributed")
    port = _free_port()
    [rank0] = _meet([(FLEET, _ranks_env(port, RANK="0", WORLD_SIZE="2")),
                     (PEER + [peer], _ranks_env(port, RANK="1", WORLD_SIZE="2"))])
    _one_line_exit_2(rank0, needle)


@pytest.mark.slow
def test_ranks_whose_world_sizes_disagree_each_end_in_one_line():
    """WORLD_SIZE=2 on rank 0 and 3 on rank 1: neither can meet the other; each says so within its bound (rank 1
    aborted with SIGABRT, "terminate called without an active exception", once its wait ended)."""
    pytest.importorskip("torch.distributed")
    port = _free_port()
    results = _meet([(FLEET, _ranks_env(port, RANK=str(rank), WORLD_SIZE=str(world))) for rank, world in
                     ((0, 2), (1, 3))])
    for rank, result in enumerate(results):  # rank 0 may meet rank 1 and wait for its data; rank 1 waits for rank 2
        _one_line_exit_2(result, f"check --fleet: rank {rank} could not ", " within 2 s (")


@pytest.mark.slow
def test_an_unreachable_master_prints_no_c10d_line():
    """Rank 1 alone, nobody at MASTER_PORT: c10d's own "[E… socket.cpp] [c10d] The client socket has timed out"
    line reached stderr before gpudoctor's."""
    pytest.importorskip("torch.distributed")
    [rank1] = _meet([(FLEET, _ranks_env(_free_port(), RANK="1", WORLD_SIZE="2"))])
    _one_line_exit_2(rank1, "check --fleet: rank 1 could not reach the others within 2 s")


@pytest.mark.slow
@pytest.mark.parametrize("peer,needle", [("die", "could not announce the size of its host name"),
                                         ("greet", "could not finish the sweep (")])
def test_bench_nccl_with_a_peer_that_dies(peer, needle):
    """Under a launcher, a peer gone before or during the sweep: one line and exit 2 (it was exit 3, "a bug", or
    SIGABRT)."""
    pytest.importorskip("torch.distributed")
    port = _free_port()
    bench = gpudoctor_cmd() + ["bench", "nccl", "--backend", "gloo", "--timeout", "2", "-e", "64K", "-n", "50"]
    [rank0] = _meet([(bench, _ranks_env(port, RANK="0", WORLD_SIZE="2")),
                     (PEER + [peer], _ranks_env(port, RANK="1", WORLD_SIZE="2"))])
    _one_line_exit_2(rank0, f"bench nccl: rank 0 {needle}")


PAYLOADS = ["\x1b[2J", "\x1b]0;title\x07", "\r", "\u202e"]


def _human_outputs(tmp_path, payload):
    """(command, format) → its output, for every command with a human format that shows a string from a file or
    the machine: a model file's name, a site policy's texts, a benchmark's table."""
    import argparse

    from gpudoctor.cli.bench import _write

    model = tmp_path / f"m{payload}x.json"
    model.write_text((FIXTURES / "models" / "qwen2.5-0.5b.config.json").read_text())
    policy = tmp_path / "site.toml"
    text = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in payload)  # a TOML escape
    policy.write_text(f'schema = "gpudoctor.policy/1"\n[[rule]]\nid = "SITE001"\nname = "n"\nseverity = "info"\n'
                      f'summary = "s{text}s"\nmessage = "m{text}m"\n'
                      f'require = {{ fact = "env.NCCL_IB_HCA", op = "eq", value = "v{text}v" }}\n'
                      f'fix = {{ summary = "f{text}f" }}\n')
    outputs = {}
    for fmt in ("plain", "rich"):
        outputs[("estimate", fmt)] = _run("estimate", "--model", model, "--gpu", "4090", "--format", fmt)
    outputs[("rules", "plain")] = _run("rules", "--policy", policy)
    outputs[("explain", "plain")] = _run("explain", "SITE001", "--policy", policy)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        _write(argparse.Namespace(format="plain", output=None), {}, [], f"gpu{payload}name busbw 1.0\n")
    outputs[("bench", "plain")] = (0, out.getvalue(), "")
    return outputs


@pytest.mark.parametrize("payload", PAYLOADS, ids=repr)
def test_every_human_format_escapes_untrusted_strings(tmp_path, payload):
    """CSI, OSC, a carriage return and a right-to-left override in a file name, a policy's texts or a benchmark's
    row reach every human format escaped (`\\x1b`, `\\u202e`), never acted on."""
    for (command, fmt), (code, out, err) in _human_outputs(tmp_path, payload).items():
        assert code in (0, 1) and ("\\x1b" in out or "\\r" in out or "\\x0d" in out or "\\u202e" in out), \
            (command, fmt, code, out, err)
        _no_controls(out + err)


# ---- the MCP server's reach: its roots only, never /proc, /sys or /dev; preview_fix echoes .env files only ------

@pytest.fixture
def mcp_tools(tmp_path, monkeypatch):
    """The MCP tools (called as the server calls them) with `tmp_path / "root"` as the server's one root."""
    pytest.importorskip("pydantic")
    from gpudoctor.mcpserver import tools

    root = tmp_path / "root"
    root.mkdir()
    monkeypatch.setattr(tools, "_roots", [])
    tools.set_scope([str(root)])
    return tools, root


def _refused(call, *needles) -> str:
    from gpudoctor.errors import InputError

    with pytest.raises(InputError) as caught:
        call()
    for needle in needles:
        assert needle in str(caught.value), caught.value
    return str(caught.value)


def test_mcp_tools_read_nothing_outside_their_roots(mcp_tools, tmp_path):
    tools, root = mcp_tools
    outside = tmp_path / "job.env"
    outside.write_text("NCCL_DEBUG=INFO\n")
    (root / "link.env").symlink_to(outside)
    (root / "proc").symlink_to("/proc/self")
    for path in (str(outside), str(root / "link.env"), str(root / ".." / "job.env"), "/proc/self/environ",
                 str(root / "proc" / "environ"), "/sys/kernel/notes", "/dev/zero"):
        for call in (lambda path=path: tools.preview_fix(env_file=path),
                     lambda path=path: tools.lint_files(paths=[path]),
                     lambda path=path: tools.diagnose_text(paths=[path]),
                     lambda path=path: tools.check_machine(script=[path]),
                     lambda path=path: tools.estimate_memory(model=path)):
            _refused(call, "outside the folders this server may read", str(root))
    _refused(lambda: tools.lint_files(paths=["/"]), "outside the folders", "never /proc, /sys, /dev")


@pytest.mark.parametrize("name,text", [
    (".netrc", "machine hf.co login me password n3trcSecret\n"),
    (".pgpass", "db.internal:5432:train:me:pgpa55Secret\n"),
    ("id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n"),
    ("job.env", "NCCL_DEBUG=INFO\nhost:5432:db:me:pgpa55Secret\n"),
    ("job.env", 'NCCL_DEBUG=INFO\nTOKEN="unterminated\n'),
], ids=["netrc", "pgpass", "private key", "env with a pgpass line", "env that does not parse"])
def test_preview_fix_never_echoes_a_file_that_is_not_a_dotenv(mcp_tools, name, text):
    """Its diff's context lines are the file's own: a .netrc password, a .pgpass line or a key body came back."""
    tools, root = mcp_tools
    (root / name).write_text(text)
    said = _refused(lambda: tools.preview_fix(env_file=str(root / name), quick=True), "preview_fix previews .env "
                    "files only")
    assert "Secret" not in said and "b3Blbn" not in said


# ---- secrets: redacted, then cut (a token cut short is no longer known as one) -----------------------------------

TOKEN = "hf_Zq8sEcReT0123456789abcdefghijk"
PASSWORD = "pa55word0123456789abcdef"
CUT_INPUTS = {  # each puts the secret where gpudoctor quotes a line cut short (60 or 80 characters)
    "env line": {"bad.env": f"NCCL_DEBUG=INFO\nthis line is not an assignment, you see: {TOKEN}\n"},
    "first command": {"job.sbatch": f"#!/bin/bash\npython train.py --lr 3 --hub https://me:{PASSWORD}@hf.internal/x"
                                    "\n#SBATCH -N 2\n"},
    "deepspeed value": {"ds_config.json": '{"train_micro_batch_size_per_gpu": "' + "a" * 38 + f' {TOKEN}", '
                                          '"train_batch_size": 8}\n'},
    "python segment": {"train.py": "import torch.distributed as dist\ndist.init_process_group('nccl', init_method="
                                   f"'tcp://me:{PASSWORD}@host:23456/path/x/y/z/w')\n",
                       "run.sbatch": "#!/bin/bash\npython train.py\n"},
}


@pytest.mark.parametrize("case", CUT_INPUTS)
@pytest.mark.parametrize("fmt", ["plain", "json"])
def test_a_secret_in_a_line_quoted_short_is_redacted_before_the_cut(tmp_path, case, fmt):
    """An unparsable .env line, an sbatch's first command, a DeepSpeed value and a Python source segment were cut
    first (60 or 80 characters), leaving `hf_Zq8sEcReT01…` or a URL password without its `@`."""
    for name, text in CUT_INPUTS[case].items():
        (tmp_path / name).write_text(text)
    code, out, err = _run("lint", tmp_path, "--format", fmt)
    assert "<redacted>" in out + err, out + err  # the quoted line is there, its secret hidden
    for secret in (TOKEN, PASSWORD):
        assert secret[:10] not in out + err, out + err


@pytest.mark.parametrize("text,hidden", [
    ("cannot parse 'HF=hf_Zq8sEcReT01…'", "hf_Zq8sEcReT01"), ("token sk-proj-abcd1234...", "sk-proj-abcd1234"),
    ("url https://me:pa55w…", "pa55w"), ("python train.py --api-key=7d1c9f8e7a6b5c4d", "7d1c9f8e7a6b5c4d"),
    ("--wandb-key=abcd1234efgh", "abcd1234efgh"), ("torchrun x.py --hf-token abcdef123456 --lr 3", "abcdef123456"),
    ("api.key=s3cr3tvalue1", "s3cr3tvalue1"), ("x-api-key=s3cr3tvalue1", "s3cr3tvalue1"),
    ("accessToken: s3cr3tvalue1", "s3cr3tvalue1"), ("AWS_SECRET_ACCESS_KEY wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI"),
    ("host node-AKIAIOSFODNN7EXAMPLE up", "AKIAIOSFODNN7EXAMPLE"), ("x_sk-abcdefghijklmnopqrstuvwxyz", "sk-abcdefg"),
    ("open v1-hf_abcdefghijklmnopqrstuvwxyz.json: No such file", "hf_abcdefghij"),
    ('gpudoctor_up{host="gpu-hf_abcdefghijklmnopqrstuvwxyz"} 1', "hf_abcdefghij"),
])
def test_secret_forms_the_redactor_missed(text, hidden):
    """Options and `name: value`/`name value` forms with a secret name (read as a bare `key` before), tokens cut
    short, and tokens glued to a word by '-' or '_' (a host name, a Prometheus label, a missing file)."""
    from gpudoctor.redact import redact_text

    assert hidden not in redact_text(text) and "<redacted>" in redact_text(text)


@pytest.mark.parametrize("text", ["HF_TOKEN is not set", "WANDB_API_KEY set but empty", "KeyError: 'x'",
                                  "unknown key: offload", "--tokenizer gpt2", "--max-new-tokens 50", "the key lr"])
def test_prose_about_secret_names_stays_readable(text):
    from gpudoctor.redact import redact_text

    assert redact_text(text) == text


@pytest.mark.parametrize("argv", [("check", "--api-key", "7d1c9f8e7a6b5c4d3e2f"), ("explain", TOKEN[:16]),
                                  ("explain", f"v1-{TOKEN}"), ("check", "--select", TOKEN[:12])],
                         ids=["unknown option", "explain a short token", "explain a glued token", "--select a token"])
def test_error_lines_never_echo_a_secret(argv):
    err = _usage_error(argv)
    assert "7d1c9f8e" not in err and "Zq8sEc" not in err, err


# ---- reads that block: every read bounded, the kernel's folders never walked -------------------------------------

@pytest.fixture
def blocking_read(monkeypatch):
    """os.read never returns for one file (as /proc/kmsg's read waits for the kernel's next line, for root)."""
    import threading

    real = os.read

    def block(path):
        def read(fd, size):
            if os.path.realpath(f"/proc/self/fd/{fd}") == os.path.realpath(path):
                threading.Event().wait()
            return real(fd, size)

        monkeypatch.setattr(os, "read", read)
    return block


@pytest.mark.slow
@pytest.mark.parametrize("argv", [("check", "--from", "{}"), ("lint", "{}"), ("check", "--snapshot", "{}")],
                         ids=" ".join)
def test_a_regular_file_whose_read_blocks_ends_in_one_line(tmp_path, blocking_read, monkeypatch, argv):
    """A regular file had no deadline: `lint /proc`, MCP's lint_files(["/"]) or `check --from /proc/kmsg` hung
    every reader forever. A file that says it is empty (as the kernel's do) is read within the first-byte deadline
    (30 s; 1 s here)."""
    import time

    from gpudoctor import files

    monkeypatch.setattr(files, "FIRST_BYTE_DEADLINE", 1.0)
    target = tmp_path / "kmsg.env"
    target.write_text("")  # size 0, like every file of /proc
    blocking_read(target)
    started = time.monotonic()
    code, out, err = _run(*[a.format(target) for a in argv])
    assert time.monotonic() - started < 20
    assert code == 2 and len(err.splitlines()) == 1 and "whose read blocks" in err, (code, out, err)


@pytest.mark.parametrize("folder", ["/proc", "/sys/kernel", "/dev", "/proc/self/../self"])
def test_folder_lint_never_walks_the_kernel_s_folders(folder):
    _usage_error(("lint", folder), "gpudoctor walks no folder under /proc, /sys, /dev")


def test_a_walk_from_above_skips_the_kernel_s_folders(tmp_path, monkeypatch):
    from pathlib import Path

    from gpudoctor import files

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "x.env").write_text("A=1\n")
    (tmp_path / "job.env").write_text("A=1\n")
    monkeypatch.setattr(files, "NEVER_WALKED", (str(tmp_path / "proc"),))
    assert [p.name for p in files.tree_files(Path(tmp_path))] == ["job.env"]


@pytest.mark.slow
def test_a_fifo_without_a_writer_waits_no_longer_than_timeout(tmp_path):
    """It waited 30 s whatever --timeout said."""
    import time

    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    started = time.monotonic()
    _usage_error(("check", "--from", fifo, "--timeout", "1"), "no data within 1 s")
    assert time.monotonic() - started < 15


def test_a_policy_with_an_integer_of_5000_digits_is_refused_in_one_line(tmp_path):
    """Python's int() converts at most 4,300 digits: tomllib's ValueError was exit 3, an internal error."""
    policy = tmp_path / "site.toml"
    policy.write_text('schema = "gpudoctor.policy/1"\nx = ' + "9" * 5000 + "\n")
    _usage_error(("check", "--snapshot", MACHINE, "--policy", policy), "invalid TOML", "4300 digits")


def test_fix_dry_run_shows_the_file_s_escape_sequences_escaped(tmp_path):
    """`lint` escaped the file's control characters; the dry run's diff printed them raw."""
    env = tmp_path / "job.env"
    env.write_text('NCCL_DEBUG=INFO\nX="\x1b[2Jhello\x1b]0;title\x07"\n')
    code, out, err = _run("fix", "--snapshot", MACHINE, "--write-env", env, "--dry-run")
    assert "+NCCL_DEBUG=WARN" in out and "\\x1b[2J" in out
    _no_controls(out + err)


@pytest.mark.parametrize("name", ["_OOM_TOTAL", "_OOM_FREE"])
def test_the_out_of_memory_patterns_are_linear_in_a_line_of_digits(name):
    """A number could start at every digit of a run: a line of 20,000 digits took seconds (quadratic); now each
    run is tried once. Twice the line costs about twice the time, not four times (fastest of three)."""
    import re
    import time

    from gpudoctor.ingest import log_memory

    pattern: re.Pattern = getattr(log_memory, name)

    def cost(n: int) -> float:
        line = "1" * n + " x"
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            pattern.search(line)
            runs.append(time.perf_counter() - started)
        return min(runs)

    assert cost(8192) < 0.05  # a line as long as the reader keeps (normalize.MAX_LINE)
    assert cost(16384) < 3 * cost(8192) + 0.002


# ---- unusable standard streams: one line where one can be written, exit 2 ----------------------------------------

STREAM_CASES = {
    "stdout on /dev/full": (("check", "--snapshot", MACHINE), dict(stdout="/dev/full"), "cannot write standard output"),
    "stdout closed": (("check", "--snapshot", MACHINE), dict(stdout=None), "standard output closed"),
    "stderr closed": (("check", "--snapshot", MACHINE), dict(stderr=None), "standard error closed"),
    "stdin closed, --from -": (("check", "--from", "-"), dict(stdin=None), "standard input is closed"),
    "stdin closed, mcp": (("mcp",), dict(stdin=None), "standard input is closed"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", STREAM_CASES)
def test_an_unusable_standard_stream_is_one_line_and_exit_2(tmp_path, case):
    """They gave exit 3 (an internal error) or 120 with a traceback."""
    argv, streams, needle = STREAM_CASES[case]
    said = tmp_path / "said"
    with open(said, "w") as catch:
        files = {"stdin": subprocess.DEVNULL, "stdout": catch, "stderr": catch}
        closing = {name: None for name, value in streams.items() if value is None}
        for name, value in streams.items():
            if value is not None:
                files[name] = open(value, "w")
        fds = {"stdin": 0, "stdout": 1, "stderr": 2}

        def close_them():  # in the child, before gpudoctor starts: `<&-`, `>&-`, `2>&-`
            for name in closing:
                os.close(fds[name])

        done = subprocess.run(gpudoctor_cmd() + [str(a) for a in argv], cwd=ROOT, timeout=60, preexec_fn=close_them,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)), **files)
    text = said.read_text()
    assert done.returncode == 2 and text.count("\n") == 1 and needle in text, (done.returncode, text)
    assert "Traceback" not in text


@pytest.mark.slow
@pytest.mark.parametrize("when", ["early", "late"])
@pytest.mark.parametrize("signum,code,line", [("INT", 130, "gpudoctor: interrupted\n"),
                                              ("TERM", 143, "gpudoctor: terminated\n")])
def test_a_signal_before_or_after_the_command_is_one_line(when, signum, code, line):
    """Ctrl-C while the command line loaded printed a KeyboardInterrupt traceback (SIGTERM ended it without a
    word); one while the children were cleaned up after the command ended with no line."""
    env = dict(os.environ, PYTHONPATH=f"{ROOT / 'tests' / 'faults'}{os.pathsep}{ROOT}", GPUDOCTOR_TEST_SIGNAL_AT=when,
               GPUDOCTOR_TEST_SIGNAL=signum)
    done = subprocess.run(gpudoctor_cmd() + ["rules"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert (done.returncode, done.stderr) == (code, line)
