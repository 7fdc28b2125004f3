"""`lint FOLDER`: what git ignores is never read, data files are skipped by their type, and a walk cut at its
bound is said (a warning, never a ✓): the files after the cut were not linted. `lint -` reads standard input."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from conftest import FIXTURES, ROOT, cli_in_process, gpudoctor_cmd

BAD_JOB = (FIXTURES / "jobs" / "bad_job.sh").read_text()  # GD402 twice, GD410


def repository(root, ignore="data/\n"):
    """A git repository with a job script that has errors, and a data folder that .gitignore names."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text(ignore)
    (root / "slurm").mkdir()
    (root / "slurm" / "job.sbatch").write_text(BAD_JOB)  # walked after data/
    return root


def lint(folder, *options):
    return cli_in_process("lint", ".", "--format", "plain", *options, cwd=folder)


@pytest.fixture
def small_bound(monkeypatch):
    """The walk's bounds at a size a test fills in milliseconds (the real ones are tested once, slow)."""
    import gpudoctor.files

    monkeypatch.setattr(gpudoctor.files, "MAX_TREE_FILES", 50)
    monkeypatch.setattr(gpudoctor.files, "MAX_TREE_ENTRIES", 500, raising=False)


def many(folder, count, suffix=".txt"):
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (folder / f"{index:06d}{suffix}").write_text("x\n")


def test_a_git_ignored_data_folder_never_hides_the_job_files(tmp_path, small_bound):
    root = repository(tmp_path)
    many(root / "data", 51)
    result = lint(root)
    assert result.returncode == 1, result.stdout
    assert "GD402" in result.stdout and "no job files" not in result.stdout and "✓" not in result.stdout


@pytest.mark.slow
def test_the_reported_repository_with_20001_ignored_files_is_linted(tmp_path):
    root = repository(tmp_path)
    many(root / "data", 20_001)
    result = lint(root)
    assert result.returncode == 1 and "GD402" in result.stdout and "GD410" in result.stdout, result.stdout


def test_a_walk_cut_at_its_bound_is_a_warning_never_a_pass(tmp_path, small_bound):
    (tmp_path / "aaa").mkdir()
    many(tmp_path / "aaa", 60)  # not ignored, not data: read until the bound
    (tmp_path / "zzz.env").write_text("NCCL_DEBUG=WARN\n")
    result = lint(tmp_path)
    assert result.returncode == 0, result.stdout  # a warning: the default --fail-on error lets it pass
    assert "GD003" in result.stdout and "not all read" in result.stdout and "stopped after 50 files" in result.stdout
    assert "✓" not in result.stdout
    assert lint(tmp_path, "--fail-on", "warning").returncode == 1


def test_data_files_are_skipped_by_type_and_do_not_count(tmp_path, small_bound):
    root = repository(tmp_path, ignore="")
    many(root / "a_images", 40, ".jpg")
    many(root / "a_arrays", 40, ".npy")
    many(root / "a_shards", 40, ".parquet")
    result = lint(root)
    assert result.returncode == 1 and "GD402" in result.stdout and "not all read" not in result.stdout


def test_nested_gitignore_negation_and_parent_gitignore(tmp_path):
    root = repository(tmp_path, ignore="*.sbatch\nrun/\n")
    (root / "jobs").mkdir()
    (root / "jobs" / ".gitignore").write_text("!keep.sbatch\n")
    (root / "jobs" / "keep.sbatch").write_text(BAD_JOB)
    (root / "jobs" / "drop.sbatch").write_text(BAD_JOB)
    (root / "run").mkdir()
    (root / "run" / "x.sbatch").write_text(BAD_JOB)
    result = lint(root, "--format", "json")
    paths = {finding["location"]["path"] for finding in json.loads(result.stdout)["findings"]}
    assert paths == {"jobs/keep.sbatch"}
    inner = cli_in_process("lint", ".", "--format", "json", cwd=root / "jobs")  # the parent's .gitignore applies
    assert {finding["location"]["path"] for finding in json.loads(inner.stdout)["findings"]} == {"keep.sbatch"}


def test_a_file_named_on_the_command_line_is_read_even_when_ignored(tmp_path):
    root = repository(tmp_path, ignore="*.sbatch\n")
    result = cli_in_process("lint", "slurm/job.sbatch", "--format", "plain", cwd=root)
    assert result.returncode == 1 and "GD402" in result.stdout


def test_lint_dash_reads_standard_input_named_by_stdin_filename(tmp_path):
    def run(text, *options):
        return subprocess.run([*gpudoctor_cmd(), "lint", "-", "--format", "json", *options], input=text,
                              capture_output=True, text=True, timeout=60, cwd=tmp_path)

    piped = run(BAD_JOB)
    assert piped.returncode == 1, piped.stderr
    findings = json.loads(piped.stdout)["findings"]
    assert {f["rule"] for f in findings} >= {"GD402", "GD410"}
    assert {f["location"]["path"] for f in findings} == {"<stdin>"}
    config = (FIXTURES / "ds_configs" / "zero2_offload.json").read_text()
    named = json.loads(run(config, "--stdin-filename", "ds/zero2.json").stdout)
    assert [(f["rule"], f["location"]["path"], f["location"]["line"]) for f in named["findings"]
            if f["rule"] == "GD304"] == [("GD304", "ds/zero2.json", 22)]
    assert named["source"]["paths"] == ["ds/zero2.json"]
    twice = subprocess.run([*gpudoctor_cmd(), "lint", "-", "-"], input="", capture_output=True, text=True,
                           timeout=60)
    assert twice.returncode == 2 and twice.stderr.count("\n") == 1


@pytest.mark.slow
def test_real_pre_commit_hands_every_job_file_to_the_shipped_hooks(tmp_path):
    """The hooks of .pre-commit-hooks.yaml as pre-commit runs them (their file filters, pre-commit's own file
    classification), with the installed gpudoctor as the entry: a .env file, a non-executable sbatch script and a
    DeepSpeed config each reach gpudoctor; README.md and package.json are skipped."""
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (pip install '.[test]')")
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    local = []
    for hook in hooks:
        entry = hook["entry"].replace("gpudoctor", f"{sys.executable} -m gpudoctor", 1)
        local.append({**hook, "entry": entry + " --format plain", "language": "system"})
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{"repo": "local", "hooks": local}]}))
    (repo / ".env").write_text("NCCL_P2P_LEVEL=nvl\n")
    (repo / "job.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=2\nexport NCCL_PROTO=LL,Simple2\n"
                                     "srun python t.py\n")
    (repo / "zero2_offload.json").write_text((FIXTURES / "ds_configs" / "zero2_offload.json").read_text())
    (repo / "README.md").write_text("# export NCCL_DEBUG=INFO\n")
    (repo / "package.json").write_text('{"name": "x", "version": "1.0.0"}\n')
    (repo / "train.py").write_text("import os\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n")
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "cache"), "NO_COLOR": "1", "COLUMNS": "200"}
    result = subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose", "--color", "never"],
                            cwd=repo, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert ".env:1 NCCL_P2P_LEVEL=nvl" in out
    assert "job.sbatch:3 NCCL_PROTO=LL,Simple2" in out
    assert "zero2_offload.json:22 offload_param" in out
    assert "README.md" not in out.replace("- hook id", "") and "package.json" not in out
