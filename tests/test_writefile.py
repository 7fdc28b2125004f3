"""Every output file goes through gpudoctor.files.write_file: devices and FIFOs are written in place, symlinks followed,
owner/group/mode kept, read-only files refused, writers serialised, the folder fsynced. Device cases run as root
(CI does) on a private `mknod` copy of /dev/null, never the real one."""

from __future__ import annotations

import fcntl
import os
import stat
import subprocess
import threading
import time

import pytest
from conftest import FIXTURES, ROOT, cli_in_process, gpudoctor_cmd

from gpudoctor import files
from gpudoctor.cli import main
from gpudoctor.files import ReadOnlyError, write_file

MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mknod and chown need root (CI runs as root)")


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL", "CUDA_", "DS_"))}
    env["PYTHONPATH"] = str(ROOT)
    return env


def _gpudoctor(*args, **kwargs):
    """The command as a shell runs it, without this shell's NCCL, CUDA and DeepSpeed variables: in this process
    (what a command writes is what these tests are about), in its own where `kwargs` set one up (a umask)."""
    if not kwargs:
        return cli_in_process(*args, env={name: None for name in os.environ if name not in _env()})
    return subprocess.run(gpudoctor_cmd() + [str(a) for a in args], capture_output=True, text=True, env=_env(),
                          timeout=120, **kwargs)


def _spawn(*args):
    return subprocess.Popen(gpudoctor_cmd() + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env())


def _run_in_process(*args):
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def _null_device(tmp_path):
    node = tmp_path / "null"
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return node


@ROOT_ONLY
@pytest.mark.parametrize("argv", [
    ("fix", "--snapshot", MACHINE, "--write-env"),
    ("check", "--snapshot", MACHINE, "--format", "json", "--output"),
    ("snapshot", "--from", FIXTURES / "reports" / "collect_env_mig.txt", "-o"),
])
def test_a_device_is_written_in_place_never_replaced(tmp_path, argv):
    node = _null_device(tmp_path)
    if not argv[2].exists():
        pytest.skip(f"fixture {argv[2]} is missing")
    done = _gpudoctor(*argv, node)
    assert done.returncode in (0, 1), done.stderr
    assert stat.S_ISCHR(node.stat().st_mode) and node.stat().st_rdev == os.makedev(1, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["null"]  # no temporary file, no lock file left


def test_a_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_text()))
    reader.start()
    done = _gpudoctor("check", "--snapshot", MACHINE, "--format", "json", "--output", fifo)
    reader.join(30)
    assert done.returncode in (0, 1), done.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and '"gpudoctor.report/1"' in received[0]


def test_a_fifo_nobody_reads_is_given_up_after_the_deadline(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    monkeypatch.setattr(files, "FIFO_DEADLINE", 0.3)
    started = time.monotonic()
    with pytest.raises(OSError, match="no reader"):
        write_file(str(fifo), "x")
    assert time.monotonic() - started < 10 and stat.S_ISFIFO(fifo.stat().st_mode)


def test_output_through_a_symlink_keeps_the_link(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "report.json"
    link.symlink_to(real)
    done = _gpudoctor("check", "--snapshot", MACHINE, "--format", "json", "--output", link)
    assert done.returncode in (0, 1), done.stderr
    assert link.is_symlink() and '"gpudoctor.report/1"' in real.read_text()


def test_dash_is_stdout():
    done = _gpudoctor("check", "--snapshot", MACHINE, "--format", "json", "--output", "-")
    assert '"gpudoctor.report/1"' in done.stdout and not os.path.exists(ROOT / "-")


def test_a_new_file_gets_the_umask_mode(tmp_path):
    target = tmp_path / "gpudoctor.prom"
    done = _gpudoctor("check", "--snapshot", MACHINE, "--format", "prometheus", "--output", target,
                      preexec_fn=lambda: os.umask(0o022))
    assert done.returncode in (0, 1), done.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node_exporter, another user, can read it


@ROOT_ONLY
def test_root_keeps_a_users_owner_group_and_mode(tmp_path):
    target = tmp_path / ".env"
    target.write_text("NCCL_DEBUG=INFO\n")
    os.chown(target, 4321, 4322)
    target.chmod(0o600)
    done = _gpudoctor("fix", "--snapshot", MACHINE, "--write-env", target)
    assert done.returncode == 0, done.stderr
    info = target.stat()
    assert "NCCL_DEBUG=WARN" in target.read_text()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (4321, 4322, 0o600)


def test_a_read_only_file_is_refused_unless_forced(tmp_path):
    target = tmp_path / "report.json"
    target.write_text("keep")
    target.chmod(0o444)
    refused = _gpudoctor("check", "--snapshot", MACHINE, "--format", "json", "--output", target)
    assert refused.returncode == 2 and "read-only" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert target.read_text() == "keep"
    forced = _gpudoctor("check", "--snapshot", MACHINE, "--format", "json", "--output", target, "--force")
    assert forced.returncode in (0, 1) and '"gpudoctor.report/1"' in target.read_text()
    assert stat.S_IMODE(target.stat().st_mode) == 0o444


def test_a_read_only_env_file_is_refused(tmp_path):
    target = tmp_path / ".env"
    target.write_text("NCCL_DEBUG=INFO\n")
    target.chmod(0o400)
    with pytest.raises(ReadOnlyError):
        write_file(str(target), "X=1\n")
    done = _gpudoctor("fix", "--snapshot", MACHINE, "--write-env", target)
    assert done.returncode == 2 and "read-only" in done.stderr and target.read_text() == "NCCL_DEBUG=INFO\n"


def test_the_folder_is_fsynced_after_the_rename(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_file(str(tmp_path / "out.txt"), "x")
    assert synced == [False, True]


def test_a_second_writer_waits_and_merges_what_the_first_wrote(tmp_path):
    """The writer judges and merges under the lock (on the file itself): another writer's change made meanwhile
    survives, and no lock file is left beside the user's file."""
    target = tmp_path / ".env"
    target.write_text("NCCL_DEBUG=INFO\n")
    lock = os.open(target, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    writer = _spawn("fix", "--snapshot", MACHINE, "--write-env", target)
    try:
        assert "waiting for another process writing" in writer.stderr.readline()
        target.write_text("NCCL_DEBUG=INFO\nOTHER_WRITER=1\n")  # the other writer's change, made under its lock
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        os.close(lock)
    _out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    text = target.read_text()
    assert "OTHER_WRITER=1" in text and "NCCL_DEBUG=WARN" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env"]


def test_a_lock_held_too_long_is_one_line_and_exit_2(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "LOCK_WAIT", 0.2)
    target = tmp_path / "job.env"
    target.write_text("NCCL_DEBUG=INFO\n")
    lock = os.open(target, os.O_RDONLY)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        code, out, err = _run_in_process("fix", "--snapshot", MACHINE, "--write-env", target)
    finally:
        os.close(lock)
    assert code == 2 and "held its lock for 0.2 s" in err.splitlines()[-1] and "waiting for" in err
    assert target.read_text() == "NCCL_DEBUG=INFO\n"


def test_a_replaced_target_is_locked_again(tmp_path):
    """A writer that waited on a file another writer then replaced (rename) locks the new file, not the old one."""
    target = tmp_path / "job.env"
    target.write_text("A=1\n")
    with files.locked(str(target)):
        files.write_file(str(target), "A=2\n")  # replaced under the lock: a new inode
    with files.locked(str(target)):
        assert target.read_text() == "A=2\n"
    with files.locked(str(tmp_path / "new.env")):  # absent: its folder is locked, nothing is created
        assert sorted(p.name for p in tmp_path.iterdir()) == ["job.env"]


def test_a_loop_of_links_is_one_line_and_exit_2(tmp_path):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    code, out, err = _run_in_process("fix", "--snapshot", MACHINE, "--write-env", tmp_path / "a")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "symbolic links" in err, err


def test_write_env_judges_the_file_it_writes(tmp_path):
    """The file is the job's env: its stale NCCL_DEBUG=INFO is fixed without naming it again with --env-file."""
    target = tmp_path / "job.env"
    target.write_text("NCCL_DEBUG=INFO\nFOO=1\n")
    done = _gpudoctor("fix", "--snapshot", MACHINE, "--write-env", target)
    assert done.returncode == 0, done.stderr
    assert "up to date" not in done.stdout
    assert "# NCCL_DEBUG=INFO  # gpudoctor GD406" in target.read_text() and "FOO=1\n" in target.read_text()


def test_write_env_never_calls_lines_it_could_not_read_up_to_date(tmp_path):
    target = tmp_path / "job.env"
    target.write_text('NCCL_DEBUG=WARN\nBROKEN="never closed\n')
    done = _gpudoctor("fix", "--snapshot", MACHINE, "--write-env", target)
    assert "up to date" not in done.stdout and "line(s) 2 of" in done.stdout and "not judged" in done.stdout
    target.write_text("NCCL_DEBUG=WARN\n")
    assert "is up to date" in _gpudoctor("fix", "--snapshot", MACHINE, "--write-env", target).stdout


def test_every_command_that_writes_output_takes_force():
    """The read-only refusal says `--force writes it anyway`: every subcommand with --output must accept it."""
    import argparse

    from gpudoctor.cli import build_parser

    def commands(parser, prefix=()):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from commands(sub, prefix + (name,))
        yield prefix, {flag for action in parser._actions for flag in action.option_strings}

    writers = [(name, flags) for name, flags in commands(build_parser()) if "--output" in flags]
    assert len(writers) >= 5 and any(name == ("bench", "nccl") for name, _ in writers)
    assert [name for name, flags in writers if "--force" not in flags] == []


def test_a_temp_file_left_by_a_sigkill_is_removed_by_the_next_write(tmp_path):
    """A writer killed (SIGKILL) between its temporary file and the rename leaves that file beside the user's; the
    next write into the folder removes it (its writer is gone), and leaves a live writer's temp alone."""
    import signal
    import sys

    target = tmp_path / "job.env"
    target.write_text("OLD=1\n")
    stalled = ("import os, sys, time\nfrom gpudoctor import files\n"
               "os.replace = lambda *a: (print('written', flush=True), time.sleep(60))\n"
               f"files.write_file({str(target)!r}, 'NEW=1\\n')\n")
    writer = subprocess.Popen([sys.executable, "-c", stalled], stdout=subprocess.PIPE, text=True, env=_env())
    try:
        assert writer.stdout.readline().strip() == "written"
        left = [p.name for p in tmp_path.iterdir() if p.name != "job.env"]
        assert len(left) == 1 and left[0].endswith(".gpudoctor") and f".{writer.pid}." in left[0]
        live = tmp_path / left[0].replace(f".{writer.pid}.", f".{os.getpid()}.")  # as if this process were writing
        live.write_text("")
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    assert target.read_text() == "OLD=1\n"
    write_file(str(target), "NEWER=1\n")
    assert target.read_text() == "NEWER=1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["job.env", live.name])


def test_a_write_env_run_leaves_the_next_in_process_run_as_it_was(tmp_path):
    """The parser is built once per process (the MCP server and the library run many commands): the file one
    `fix --write-env` judged never joins the next run's --env-file list."""
    from gpudoctor.cli import build_parser

    target = tmp_path / "job.env"
    target.write_text("NCCL_DEBUG=INFO\n")
    assert _run_in_process("fix", "--snapshot", MACHINE, "--write-env", target)[0] in (0, 1)
    assert build_parser().parse_args(["fix"]).env_file == []
