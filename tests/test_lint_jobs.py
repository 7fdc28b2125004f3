"""`lint` of several files or of a folder judges each job apart: a job is a launch file plus the files it names (the
script it starts, the files it sources, the configs it passes); files that do not reach each other never share an
environment or a finding (pre-commit passes many unrelated files at once)."""

import json

from conftest import FIXTURES, cli_in_process

from gpudoctor.readers.reach import jobs

JOBS = FIXTURES / "jobs"


def lint_json(*paths):
    done = cli_in_process("lint", *map(str, paths), "--format", "json", env={"COLUMNS": "120", "NCCL_DEBUG": None})
    assert "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def findings(report, path):
    return {(f["rule"], f["message"]) for f in report["findings"] if (f.get("location") or {}).get("path") == path}


def test_two_batch_scripts_given_together_are_judged_as_each_is_alone():
    alone = lint_json(JOBS / "job.sbatch")
    together = lint_json(JOBS / "job.sbatch", JOBS / "clean_multinode.sbatch")
    path = str(JOBS / "job.sbatch")
    assert findings(together, path) == findings(alone, path)
    assert "GD408" in {rule for rule, _ in findings(together, path)}  # only the other job sets the variable
    assert not any("also set" in message for _, message in findings(together, path))


def test_a_rule_unknown_for_one_job_is_not_passed_for_both(tmp_path):
    (tmp_path / "a.sbatch").write_text("#!/bin/bash\n#SBATCH --nodes=2\nsrun python missing.py\n")
    (tmp_path / "b.sh").write_text("#!/bin/bash\npython train.py\n")
    (tmp_path / "train.py").write_text("import torch\nprint(torch.cuda.is_available())\n")
    report = lint_json(tmp_path / "a.sbatch", tmp_path / "b.sh", tmp_path / "train.py")
    assert "GD604" in {item["rule"] for item in report["unknown"]}
    assert "GD604" not in report["passed"]


def test_jobs_are_the_files_a_launch_file_names(tmp_path):
    files = {
        "a.sbatch": "source env.sh\nsrun python train_a.py --deepspeed ds.json\n",
        "b.sbatch": "source ./env.sh\ncd src && python train_b.py\n",
        "env.sh": "export NCCL_DEBUG=WARN\n",
        "train_a.py": "import torch\n",
        "src/train_b.py": "import torch\n",
        "ds.json": "{}",
        "other.env": "NCCL_DEBUG=INFO\n",
        "stray.json": "{}",
        "lone.py": "import torch\n",
    }
    paths = [str(tmp_path / name) for name in files]
    settings = [name.endswith((".json", ".env")) or name == "env.sh" for name in files]
    groups = {frozenset(list(files)[index] for index in group) for group in jobs(paths, list(files.values()),
                                                                                   settings)}
    assert groups == {frozenset({"a.sbatch", "env.sh", "train_a.py", "ds.json"}),
                      frozenset({"b.sbatch", "env.sh", "src/train_b.py"}),
                      frozenset({"other.env", "stray.json"}), frozenset({"lone.py"})}


def test_a_name_written_inside_a_longer_name_or_another_folder_reaches_nothing(tmp_path):
    files = {"job.sh": "python my_train.py\npython other/train.py\n", "train.py": "", "sub/train.py": ""}
    paths = [str(tmp_path / name) for name in files]
    groups = jobs(paths, list(files.values()), [False] * 3)
    assert sorted(map(len, groups)) == [1, 1, 1]
