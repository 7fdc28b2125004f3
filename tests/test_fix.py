"""`gpudoctor fix`: the output formats, the lossless .env merge (--write-env), and the command end to end."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest
import yaml
from conftest import FIXTURES, ROOT, cli_in_process, gpudoctor_cmd

from gpudoctor.files import write_file
from gpudoctor.fix import Change, Plan, plan_fixes, render, render_dotenv, render_k8s, render_shell
from gpudoctor.fix.envmerge import BEGIN, END, MergeError, merge, read_env, scan, split_lines, unified_diff
from gpudoctor.model import Applicability, EnvChange, Finding, Fix, Location, Report, Severity
from gpudoctor.readers.dotenv import grammar as dotenv_reader
from gpudoctor.render.describe import fix_command

MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"  # torch 2.5: NCCL_ASYNC_ERROR_HANDLING is renamed
FIXABLE = FIXTURES / "jobs" / "fixable.env"

TRICKY = {
    "PLAIN": "WARN",
    "ROUTE": "=eth0",
    "EXCLUDE": "^lo,docker",
    "SPACES": "a b  c",
    "QUOTES": "it's \"quoted\"",
    "DOLLAR": "$HOME/${USER}",
    "BACKSLASH": "C:\\path\\\\x",
    "HASH": "#not-a-comment",
    "EMPTY": "",
    "UNICODE": "café",
}


def change(name, value, rule="GD406", note="why", path=None, line=None, variable=True):
    loc = [Location(str(path), line)] if path else []
    return Change(name, value, [rule], [note], loc, list(loc) if variable else [])


def finding(rule, applicability, set_=None, unset=(), path=None, line=None, variable=None, commands=()):
    return Finding(rule, "r", Severity.WARNING, "m", evidence={"variable": variable} if variable else {},
                   fix=Fix(f"fix of {rule}", Applicability(applicability), EnvChange(set_ or {}, tuple(unset)),
                           tuple(commands)),
                   location=Location(str(path), line) if path else None)


def report_of(*findings):
    return Report(findings=tuple(findings), passed=(), unknown=(), probes=(), source={"kind": "live", "paths": []},
                  facts={})


# --- formats -------------------------------------------------------------------------------------------------

def test_dotenv_values_read_back_exactly():
    text = render_dotenv([change(k, v) for k, v in TRICKY.items()])
    read = dotenv_reader.read(text, "x.env")
    assert not read.errors
    assert {a.name: a.value for a in read.assignments} == TRICKY
    assert not any(a.unresolved for a in read.assignments)  # single quotes: python-dotenv never expands them
    assert "PLAIN=WARN\n" in text and "ROUTE==eth0\n" in text


def test_dotenv_unset_is_a_comment():
    text = render_dotenv([change("CUDA_LAUNCH_BLOCKING", None, "GD409")])
    assert all(line.startswith("#") for line in text.splitlines())
    assert not dotenv_reader.read(text, "x.env").assignments


def test_shell_exports_and_unsets(tmp_path):
    script = render_shell([change(k, v) for k, v in TRICKY.items()] + [change("GONE", None, "GD409")])
    assert "unset GONE\n" in script and "export PLAIN=WARN\n" in script
    probe = script + "".join(f'printf "%s\\0" "${{{name}-UNSET}}"\n' for name in list(TRICKY) + ["GONE"])
    done = subprocess.run(["sh", "-c", probe], capture_output=True, check=True,
                          env={"PATH": os.environ.get("PATH", ""), "GONE": "1", "HOME": "/h", "USER": "u",
                               "LC_ALL": "C.UTF-8"})
    values = done.stdout.decode("utf-8").split("\0")[:-1]
    assert values == list(TRICKY.values()) + ["UNSET"]


def test_slurm_taskprolog_lines_are_verbatim():
    plan = Plan(changes=[change("NCCL_SOCKET_IFNAME", "^lo,docker"), change("SPACES", "a b"),
                         change("NCCL_DEBUG_SUBSYS", None), change("MULTI", "a\nb", "GD999")])
    text = render(plan, "slurm")
    commands = [line for line in text.splitlines() if not line.startswith("#")]
    # slurmstepd takes everything after '=' to the end of the line: no quoting, or the quotes become the value
    assert commands == ["export NCCL_SOCKET_IFNAME=^lo,docker", "export SPACES=a b", "unset NCCL_DEBUG_SUBSYS"]
    assert [item.rule for item in plan.left] == ["GD999"]  # a value with a newline cannot be a TaskProlog line


def test_k8s_env_list_parses_as_yaml():
    values = dict(TRICKY, NUMBER="1", BOOL="true", NULLISH="null")
    text = render_k8s([change(k, v) for k, v in values.items()] + [change("CUDA_LAUNCH_BLOCKING", None, "GD409")])
    data = yaml.safe_load(text)
    assert data["env"] == [{"name": k, "value": v} for k, v in values.items()]  # every value stays a string
    assert "remove the entry `- name: CUDA_LAUNCH_BLOCKING`" in text
    assert yaml.safe_load(render_k8s([change("X", None)])) == {"env": []}


def test_plan_applies_safe_only_by_default_and_lists_the_rest():
    report = report_of(
        finding("GD406", "safe", {"NCCL_DEBUG": "WARN"}, path="a.env", line=2, variable="NCCL_DEBUG"),
        finding("GD402", "unsafe", {"NCCL_PROTO": "LL"}, path="a.env", line=3),
        finding("GD102", "display-only", commands=["conda install cuda-toolkit"]),
        finding("GD101", "display-only", {"CUDA_HOME": "/opt/cuda"}))
    plan = plan_fixes(report)
    assert [c.describe() for c in plan.changes] == ["NCCL_DEBUG=WARN"]
    assert plan.changes[0].set_at == [Location("a.env", 2)]
    assert [(item.rule, item.why.split(":")[0].split(",")[0]) for item in plan.left] == [
        ("GD402", "unsafe"), ("GD102", "display-only"), ("GD101", "display-only")]
    assert plan.left[1].commands == ("conda install cuda-toolkit",)
    assert [c.name for c in plan_fixes(report, unsafe=True).changes] == ["NCCL_DEBUG", "NCCL_PROTO"]


def test_plan_fixes_that_disagree_apply_neither():
    report = report_of(finding("GD406", "safe", {"NCCL_DEBUG": "WARN"}),
                       finding("GD499", "safe", {"NCCL_DEBUG": "VERSION"}),
                       finding("GD409", "safe", unset=["CUDA_LAUNCH_BLOCKING"]),
                       finding("GD409", "safe", unset=["CUDA_LAUNCH_BLOCKING"]))
    plan = plan_fixes(report)
    assert [c.describe() for c in plan.changes] == ["unset CUDA_LAUNCH_BLOCKING"]
    assert len(plan.clashes) == 1 and "GD406" in plan.clashes[0] and "GD499" in plan.clashes[0]


# --- the .env merge --------------------------------------------------------------------------------------------

ORIGINAL = (b"\xef\xbb\xbf# team settings\r\n"
            b"export NCCL_DEBUG=INFO   # loud\r\n"
            b"NCCL_IB_HCA='mlx5_0,mlx5_1'\r\n"
            b"\r\n"
            b'PROMPT="two\r\nlines"\r\n'
            b"LATIN1=caf\xe9\r\n"
            b"CUDA_LAUNCH_BLOCKING=1")  # no final newline


def _merge_original(tmp_path, changes, **kw):
    path = tmp_path / ".env"
    path.write_bytes(ORIGINAL)
    return path, merge(read_env(str(path)), changes, str(path), **kw)


def test_merge_keeps_every_line_byte_for_byte(tmp_path):
    path = tmp_path / ".env"
    changes = [change("NCCL_DEBUG", "WARN", "GD406", "Set NCCL_DEBUG=WARN.", path, 2),
               change("CUDA_LAUNCH_BLOCKING", None, "GD409", "Remove it.", path, 8),
               change("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1", "GD404", "Rename.")]
    path, result = _merge_original(tmp_path, changes)
    write_file(str(path), result.new)
    data = path.read_bytes()
    old_lines = split_lines(ORIGINAL.decode("utf-8", "surrogateescape"))
    new_lines = split_lines(data.decode("utf-8", "surrogateescape"))
    for index, old in enumerate(old_lines):
        new = new_lines[index]
        if index in (1, 7):  # commented out in place, the original text kept after '# '
            assert new.startswith("# " + old.rstrip("\r\n").lstrip("\ufeff")) and "# gpudoctor GD4" in new
        else:
            assert new == old
    assert new_lines[1] == "# export NCCL_DEBUG=INFO   # loud  # gpudoctor GD406: Set NCCL_DEBUG=WARN.\r\n"
    assert new_lines[7] == "# CUDA_LAUNCH_BLOCKING=1  # gpudoctor GD409: Remove it.\r\n"
    assert data.startswith(b"\xef\xbb\xbf") and b"LATIN1=caf\xe9\r\n" in data
    assert new_lines[8:] == [BEGIN + "\r\n", "# GD406: Set NCCL_DEBUG=WARN.\r\n", "NCCL_DEBUG=WARN\r\n",
                             "# GD404: Rename.\r\n", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1\r\n", END + "\r\n"]
    values = {a.name: a.value for a in dotenv_reader.read(data.decode("utf-8", "replace"), ".env").assignments}
    assert values["NCCL_DEBUG"] == "WARN" and "CUDA_LAUNCH_BLOCKING" not in values
    assert values["PROMPT"] == "two\r\nlines" and values["NCCL_IB_HCA"] == "mlx5_0,mlx5_1"
    assert (result.changed, result.added, result.conflicts) == (2, 2, [])


def test_merge_comments_out_a_multiline_value_whole(tmp_path):
    path = tmp_path / ".env"
    entries = {e.key: e for e in scan(ORIGINAL.decode("utf-8", "surrogateescape"))}
    assert (entries["PROMPT"].first, entries["PROMPT"].last) == (4, 5)
    path, result = _merge_original(tmp_path, [change("PROMPT", None, "GD999", "drop", path, 5)])
    lines = split_lines(result.new)
    assert lines[4:7] == ["# gpudoctor GD999: drop\r\n", '# PROMPT="two\r\n', "# lines\"\r\n"]
    assert "PROMPT" not in {a.name for a in dotenv_reader.read(result.new, ".env").assignments}


def test_merge_is_idempotent(tmp_path):
    path = tmp_path / ".env"
    changes = [change("NCCL_DEBUG", "WARN", "GD406", "w", path, 2), change("CUDA_LAUNCH_BLOCKING", None, "GD409",
                                                                           "r", path, 8)]
    path, first = _merge_original(tmp_path, changes)
    # the second run: the rules no longer fire on the commented lines; the same changes without locations (as from
    # a run without --env-file) are already satisfied as well
    for again in ([], [change("NCCL_DEBUG", "WARN"), change("CUDA_LAUNCH_BLOCKING", None)]):
        second = merge(first.new, again, str(path))
        assert second.new == first.new and (second.changed, second.added, second.conflicts) == (0, 0, [])


def test_managed_block_is_rewritten_not_duplicated(tmp_path):
    path = tmp_path / ".env"
    text = f"A=1\n{BEGIN}\n# GD406: old\nNCCL_DEBUG=WARN\nKEEP=1\n{END}\nB=2\n"
    # a finding pointing into the block (line 4) asks for another value; KEEP is left; an unset drops an entry
    result = merge(text, [change("NCCL_DEBUG", "VERSION", "GD406", "new", path, 4), change("KEEP", None)],
                   str(path))
    assert result.new == f"A=1\n{BEGIN}\n# GD406: new\nNCCL_DEBUG=VERSION\n{END}\nB=2\n"
    assert result.new.count(BEGIN) == 1 and (result.changed, result.added) == (2, 0)
    emptied = merge(result.new, [change("NCCL_DEBUG", None)], str(path))
    assert emptied.new == "A=1\nB=2\n"  # an empty block goes away; the user's lines stay


def test_unclosed_block_is_refused(tmp_path):
    with pytest.raises(MergeError):
        merge(f"A=1\n{BEGIN}\nX=1\n", [change("X", "2")], str(tmp_path / ".env"))


def test_conflict_leaves_the_users_value_unless_forced(tmp_path):
    path = tmp_path / ".env"
    text = "# mine\nNCCL_DEBUG=TRACE\nCUDA_LAUNCH_BLOCKING=1\n"
    # the findings point into another file: nobody judged this file's lines
    changes = [change("NCCL_DEBUG", "WARN", "GD406", "w", tmp_path / "job.sbatch", 7),
               change("CUDA_LAUNCH_BLOCKING", None, "GD409", "r", tmp_path / "job.sbatch", 9)]
    result = merge(text, changes, str(path))
    assert result.new == text and [c.name for c in result.conflicts] == ["NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING"]
    assert "line" not in result.conflicts[0].message(".env").split(":")[0]
    assert ".env:2 sets NCCL_DEBUG=TRACE and GD406 wants NCCL_DEBUG=WARN" in result.conflicts[0].message(".env")
    forced = merge(text, changes, str(path), force=True)
    assert not forced.conflicts and forced.new.startswith("# mine\n# NCCL_DEBUG=TRACE  # gpudoctor GD406: w\n")
    # the same value already set by the user is no conflict and needs no addition
    same = merge("NCCL_DEBUG=WARN\n", [change("NCCL_DEBUG", "WARN", "GD406", "w", tmp_path / "job.sbatch", 7)],
                 str(path))
    assert same.new == "NCCL_DEBUG=WARN\n" and not same.conflicts and (same.changed, same.added) == (0, 0)
    assert "job.sbatch:7 sets NCCL_DEBUG too" in same.elsewhere[0][1]


def test_export_style_is_followed(tmp_path):
    result = merge("export A=1\nexport B=2\n", [change("NCCL_DEBUG", "WARN")], str(tmp_path / ".env"))
    assert "\nexport NCCL_DEBUG=WARN\n" in result.new


def test_new_file_and_no_final_newline(tmp_path):
    result = merge("", [change("NCCL_DEBUG", "WARN", "GD406", "w")], str(tmp_path / ".env"))
    assert result.new == f"{BEGIN}\n# GD406: w\nNCCL_DEBUG=WARN\n{END}\n"
    tail = merge("A=1", [change("NCCL_DEBUG", "WARN")], str(tmp_path / ".env"))
    assert tail.new.startswith("A=1\n" + BEGIN)


def test_dry_run_diff_marks_a_missing_final_newline(tmp_path):
    result = merge("A=1\nB=2", [change("B", None, "GD409", "r", tmp_path / ".env", 2)], str(tmp_path / ".env"))
    diff = unified_diff(result.old, result.new, ".env")
    assert diff.startswith("--- .env\n+++ .env (gpudoctor)\n")
    assert "-B=2\n\\ No newline at end of file\n+# B=2  # gpudoctor GD409: r\n" in diff


# --- atomic write ----------------------------------------------------------------------------------------------

def test_write_keeps_mode_and_symlink(tmp_path):
    real = tmp_path / "real.env"
    real.write_text("A=1\n")
    real.chmod(0o600)
    link = tmp_path / ".env"
    link.symlink_to(real)
    write_file(str(link), "A=2\n")
    assert link.is_symlink() and real.read_text() == "A=2\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == [".env", "real.env"]


def test_failed_write_leaves_the_original_intact(tmp_path, monkeypatch):
    path = tmp_path / ".env"
    path.write_bytes(ORIGINAL)

    def broken(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError):
        write_file(str(path), "X=1\n")
    assert path.read_bytes() == ORIGINAL and [p.name for p in tmp_path.iterdir()] == [".env"]


def test_unusable_target_path_is_exit_2_with_one_line(tmp_path):
    """A target under a regular file, not a folder (root bypasses file modes, so this is the failure CI can see)."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    done = _run("--write-env", blocker / ".env")
    assert done.returncode == 2 and "Not a directory" in done.stderr and len(done.stderr.splitlines()) == 1
    assert blocker.read_text() == ""


# --- the command -----------------------------------------------------------------------------------------------

def _run(*args, cwd=ROOT):
    """`gpudoctor fix --snapshot MACHINE ARGS` as a shell runs it, in this process, without this shell's NCCL, CUDA
    and DeepSpeed variables."""
    unset = {name: None for name in os.environ if name.startswith(("NCCL_", "TORCH_NCCL", "CUDA_", "DS_"))}
    return cli_in_process("fix", "--snapshot", MACHINE, *args, cwd=cwd, env=unset)


def test_end_to_end_write_env_into_the_env_file_it_reads(tmp_path):
    target = tmp_path / ".env"
    shutil.copy(FIXABLE, target)
    dry = _run("--env-file", target, "--write-env", target, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert target.read_bytes() == FIXABLE.read_bytes()
    assert dry.stdout.startswith(f"--- {target}\n+++ {target} (gpudoctor)\n")
    assert "\n-NCCL_ASYNC_ERROR_HANDLING=1\n" in dry.stdout
    assert "\n+# NCCL_ASYNC_ERROR_HANDLING=1  # gpudoctor GD404: " in dry.stdout
    assert dry.stdout.endswith("3 changes, 2 additions, 0 conflicts. Nothing written (--dry-run).\n")

    done = _run("--env-file", target, "--write-env", target)
    assert done.returncode == 0 and done.stdout.strip().endswith(f"Wrote {target}.")
    written = target.read_bytes()
    assert written.startswith(FIXABLE.read_bytes().split(b"export NCCL_DEBUG")[0])
    assert b"\nTORCH_NCCL_ASYNC_ERROR_HANDLING=1\n" in written and b"\nNCCL_DEBUG=WARN\n" in written

    again = _run("--env-file", target, "--write-env", target)
    assert again.returncode == 0 and "0 changes, 0 additions, 0 conflicts." in again.stdout
    assert target.read_bytes() == written

    # the rules agree: the file no longer triggers the safe fixes
    check = subprocess.run(gpudoctor_cmd() + ["check", "--snapshot", str(MACHINE), "--env-file", str(target),
                                              "--select", "GD404,GD406,GD409", "--format", "json"],
                           capture_output=True, text=True, cwd=ROOT, timeout=120,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert '"findings": []' in check.stdout


def test_end_to_end_new_env_from_a_job_script_and_by_hand_notes(tmp_path):
    target = tmp_path / "sub" / ".env"
    target.parent.mkdir()
    done = _run("--env-file", FIXTURES / "jobs" / "job.sbatch", "--write-env", target)
    assert done.returncode == 0, done.stderr
    text = target.read_text()
    assert text.startswith(BEGIN + "\n") and "\nNCCL_DEBUG=WARN\n" in text
    said = " ".join(done.stderr.split())  # the notes break at spaces to the width
    assert "by hand: remove CUDA_LAUNCH_BLOCKING at " in said and "job.sbatch:14" in said
    assert "GD402" in done.stderr and "--unsafe" in done.stderr  # what is left is listed


def test_end_to_end_the_written_file_is_judged_too(tmp_path):
    """The file's own NCCL_DEBUG=TRACE is judged (GD406 points at its line), so it is replaced, not a conflict."""
    target = tmp_path / ".env"
    target.write_bytes(b"NCCL_DEBUG=TRACE\n")
    done = _run("--env-file", FIXTURES / "jobs" / "job.sbatch", "--write-env", target)
    assert done.returncode == 0 and "conflict:" not in done.stderr, done.stderr
    assert target.read_bytes().startswith(b"# NCCL_DEBUG=TRACE  # gpudoctor GD406")


@pytest.mark.parametrize("fmt", ["dotenv", "shell", "slurm", "k8s"])
def test_end_to_end_formats(fmt):
    done = _run("--env-file", FIXABLE, "--format", fmt)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    if fmt == "dotenv":
        assert "\nTORCH_NCCL_ASYNC_ERROR_HANDLING=1\n" in out and "\nNCCL_DEBUG=WARN\n" in out
    elif fmt in ("shell", "slurm"):
        assert "\nexport NCCL_DEBUG=WARN\n" in out and "\nunset CUDA_LAUNCH_BLOCKING\n" in out
    else:
        env = yaml.safe_load(out)["env"]
        assert {"name": "NCCL_DEBUG", "value": "WARN"} in env and "CUDA_LAUNCH_BLOCKING" in out


def test_live_machine_end_to_end(tmp_path):
    """No --snapshot: the live machine's facts, the env-only rules, into a copy of the fixture."""
    target = tmp_path / ".env"
    shutil.copy(FIXABLE, target)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "TORCH_NCCL", "CUDA_"))}
    done = subprocess.run(gpudoctor_cmd() + ["fix", "--select", "GD406,GD409", "--env-file", str(target),
                                             "--write-env", str(target), "--timeout", "30"],
                          capture_output=True, text=True, cwd=ROOT, env=dict(env, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 changes, 1 addition, 0 conflicts.")


@pytest.mark.parametrize("args, message", [
    (["--write-env", ".env", "--format", "k8s"], "--write-env"),
    (["--dry-run"], "--dry-run"),
    (["--force"], "--force"),
    (["--format", "toml"], "invalid choice"),
])
def test_usage_errors(run_cli, args, message):
    code, out, err = run_cli("fix", "--snapshot", MACHINE, *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1


def test_unreadable_inputs_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("fix", "--snapshot", MACHINE, "--env-file", tmp_path / "nope.env")
    assert code == 2 and "nope.env" in err
    code, _, err = run_cli("fix", "--snapshot", MACHINE, "--write-env", tmp_path)
    assert code == 2 and "directory" in err
    bad = tmp_path / ".env"
    bad.write_text(f"{BEGIN}\nA=1\n")
    code, _, err = run_cli("fix", "--snapshot", MACHINE, "--env-file", FIXABLE, "--write-env", bad)
    assert code == 2 and "no '# <<< gpudoctor' line" in err and bad.read_text() == f"{BEGIN}\nA=1\n"


@pytest.mark.parametrize("job,form", [("jobs/job.sbatch", "--format shell"),
                                      ("jobs/seed002_nccl_pod.yaml", "--format k8s"),
                                      ("jobs/fixable.env", "--write-env fixtures/jobs/fixable.env")])
def test_the_hint_after_lint_fits_the_kind_of_file(run_cli, job, form):
    """A .env is merged; a script gets export lines and a manifest a container's env: list, never a .env beside
    them that nothing reads."""
    _, out, _ = run_cli("lint", FIXTURES / job)
    hint = " ".join(out.split("$ gpudoctor fix", 1)[1].split())
    assert hint.endswith(form.replace("fixtures/", f"{FIXTURES}/")) and (".env" not in hint or job.endswith(".env"))


def test_report_hint_names_the_files_the_fixes_point_into():
    report = report_of(finding("GD406", "safe", {"NCCL_DEBUG": "WARN"}, path="jobs/train env.env", line=2))
    assert fix_command(report) == "gpudoctor fix --env-file 'jobs/train env.env' --write-env 'jobs/train env.env'"
    report = Report(findings=(finding("GD406", "safe", {"NCCL_DEBUG": "WARN"}, path="job.sbatch", line=7),),
                    passed=(), unknown=(), probes=(), facts={},
                    source={"kind": "snapshot", "paths": ["node.json", "job.sbatch"]})
    assert fix_command(report) == "gpudoctor fix --snapshot node.json --env-file job.sbatch --format dotenv"
    assert fix_command(report_of(finding("GD408", "safe", {"A": "1"}))) == "gpudoctor fix --write-env .env"


def test_python_39_syntax():
    """The fix modules parse with Python 3.9's grammar."""
    import ast

    for name in ("gpudoctor/fix/__init__.py", "gpudoctor/fix/envmerge.py", "gpudoctor/cli/fix.py"):
        ast.parse((ROOT / name).read_text(), feature_version=(3, 9))


def test_unwritable_target_exit_2(run_cli, tmp_path):
    code, _, err = run_cli("fix", "--snapshot", MACHINE, "--env-file", FIXABLE, "--write-env",
                           tmp_path / "missing-folder" / ".env")
    assert code == 2 and "cannot write" in err and len(err.strip().splitlines()) == 1


def test_a_dry_run_writes_nothing_beside_the_file(run_cli, tmp_path):
    """--dry-run prints the diff and leaves the folder as it was: no lock file either."""
    target = tmp_path / "job.env"
    target.write_text("NCCL_DEBUG=INFO\n")
    code, out, _ = run_cli("fix", "--snapshot", FIXTURES / "machines" / "h100x8-healthy.json", "--write-env", target,
                           "--dry-run")
    assert code == 0 and "-NCCL_DEBUG=INFO\n" in out and "+NCCL_DEBUG=WARN\n" in out  # GD406's change, shown
    assert "1 change, 1 addition, 0 conflicts. Nothing written (--dry-run)." in out
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.env"]
    assert target.read_text() == "NCCL_DEBUG=INFO\n"


def test_fixing_job_files_leaves_no_machine_finding_for_you():
    """`fix --env-file job.env` on a laptop: torch missing here (GD110, no location) is no step of fixing the file."""
    import argparse
    import sys

    from gpudoctor.cli.fix import _about_the_files
    from gpudoctor.fix import Left
    from gpudoctor.model import Location

    left = [Left("GD110", "display-only", "Install torch", None), Left("GD402", "unsafe", "Set NCCL_ALGO=Ring",
                                                                        Location("job.env", 3))]
    args = argparse.Namespace(env_file=["job.env"], snapshot=None, from_reports=[], python=sys.executable)
    assert [item.rule for item in _about_the_files(args, left)] == ["GD402"]
    args.snapshot = "node.json"  # a machine was given: its findings are the user's too
    assert [item.rule for item in _about_the_files(args, left)] == ["GD110", "GD402"]


# --- several jobs --------------------------------------------------------------------------------------------

def _two_jobs(folder):
    """Two batch scripts in one folder that do not reach each other: a.sbatch sets NCCL_TIMEOUT (GD401), b.sbatch
    sets nothing gpudoctor fixes; and a .env neither names, loaded by hand beside both."""
    (folder / "a.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=1\nexport NCCL_TIMEOUT=1800\nsrun python a.py\n")
    (folder / "b.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun python b.py\n")
    (folder / "site.env").write_text("CUDA_LAUNCH_BLOCKING=1\n")
    return [folder / "a.sbatch", folder / "b.sbatch", folder / "site.env"]


def test_write_env_refuses_files_of_several_jobs(tmp_path):
    """One .env for two unrelated jobs would give b.sbatch a's fixes: refused in one line naming the jobs and how to
    pick one, nothing written."""
    a, b, site = _two_jobs(tmp_path)
    target = tmp_path / ".env"
    done = _run("--env-file", a, "--env-file", b, "--env-file", site, "--write-env", target)
    assert done.returncode == 2 and not target.exists(), done.stderr
    line, = done.stderr.strip().splitlines()
    assert "2 jobs" in line and "a.sbatch" in line and "b.sbatch" in line and f"--env-file {a}" in line


def test_write_env_of_one_job_and_the_env_file_it_is_run_with(tmp_path):
    """A job with a .env it does not name (loaded by hand) is still one job: written as before."""
    a, _, site = _two_jobs(tmp_path)
    target = tmp_path / ".env"
    done = _run("--env-file", a, "--env-file", site, "--write-env", target)
    assert done.returncode == 0, done.stderr
    assert "by hand: remove NCCL_TIMEOUT" in " ".join(done.stderr.split())
    assert "by hand: remove CUDA_LAUNCH_BLOCKING" in " ".join(done.stderr.split())


@pytest.mark.parametrize("other", ["missing.env", "."])
def test_several_files_one_not_a_file_is_still_one_line(tmp_path, other):
    a, _, _ = _two_jobs(tmp_path)
    done = _run("--env-file", a, "--env-file", tmp_path / other)
    assert done.returncode == 2 and done.stderr.startswith("gpudoctor: error: cannot read env file")
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_printed_changes_of_several_jobs_are_each_job_s_own(tmp_path):
    """Each job is judged with its own files (and the .env loaded beside both): a.sbatch's NCCL_TIMEOUT is unset in
    a's section only."""
    a, b, site = _two_jobs(tmp_path)
    done = _run("--env-file", a, "--env-file", b, "--env-file", site, "--format", "shell", "--quiet")
    assert done.returncode == 0, done.stderr
    first, second = done.stdout.split(f"# job: {b}\n")
    assert first.startswith(f"# job: {a}\n")
    assert "unset NCCL_TIMEOUT" in first and "unset NCCL_TIMEOUT" not in second
    assert "unset CUDA_LAUNCH_BLOCKING" in first and "unset CUDA_LAUNCH_BLOCKING" in second
