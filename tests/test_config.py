"""`[tool.gpudoctor]` in pyproject.toml: found from the working folder upward (the nearest file with the table),
its select, ignore, fail-on, policy and paths used where the command line says nothing, the command line winning;
a wrong setting is one line naming the file, exit 2."""

import json

from conftest import FIXTURES, cli_in_process

BAD_JOB = (FIXTURES / "jobs" / "bad_job.sh").read_text()  # GD003, GD402 twice, GD410 (a warning)


def project(root, table):
    (root / "pyproject.toml").write_text('[project]\nname = "x"\n\n[tool.gpudoctor]\n' + table)
    (root / "jobs").mkdir()
    (root / "jobs" / "job.sh").write_text(BAD_JOB)
    return root


def rules(result):
    assert result.returncode in (0, 1), result.stderr
    return sorted({finding["rule"] for finding in json.loads(result.stdout)["findings"]})


def test_settings_apply_from_a_subfolder_and_the_command_line_wins(tmp_path):
    root = project(tmp_path, 'select = ["GD4"]\nignore = ["GD402"]\nfail-on = "warning"\npaths = ["jobs"]\n')
    inside = root / "jobs"
    result = cli_in_process("lint", "--format", "json", cwd=inside)  # paths, select and ignore of the config
    assert rules(result) == ["GD410"] and result.returncode == 1  # a warning fails at fail-on = "warning"
    assert json.loads(result.stdout)["source"]["paths"] == ["."]
    wins = cli_in_process("lint", "job.sh", "--select", "GD402,GD410", "--fail-on", "never", "--format", "json",
                          cwd=inside)  # each option given wins; the config's ignore still applies
    assert rules(wins) == ["GD410"] and wins.returncode == 0
    everything = cli_in_process("lint", "job.sh", "--select", "", "--ignore", "", "--format", "json", cwd=inside)
    assert rules(everything) == ["GD003", "GD402", "GD410"]


def test_the_nearest_pyproject_with_the_table_decides(tmp_path):
    project(tmp_path, 'ignore = ["GD4"]\n')
    (tmp_path / "jobs" / "pyproject.toml").write_text('[project]\nname = "inner, no table"\n')
    assert rules(cli_in_process("lint", "job.sh", "--format", "json", cwd=tmp_path / "jobs")) == ["GD003"]
    (tmp_path / "jobs" / "pyproject.toml").write_text('[tool.gpudoctor]\nselect = ["GD402"]\n')
    assert rules(cli_in_process("lint", "job.sh", "--format", "json", cwd=tmp_path / "jobs")) == ["GD402"]


def test_a_policy_is_relative_to_the_pyproject(tmp_path):
    policy = (FIXTURES / "policies" / "site.toml").read_text()
    project(tmp_path, 'policy = "site/policy.toml"\n')
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "policy.toml").write_text(policy)
    listed = cli_in_process("rules", "--format", "json", cwd=tmp_path / "jobs")
    assert listed.returncode == 0
    assert any(not rule["id"].startswith("GD") for rule in json.loads(listed.stdout)["rules"])


def test_without_a_config_nothing_changes(tmp_path):
    (tmp_path / "job.sh").write_text(BAD_JOB)
    result = cli_in_process("lint", "job.sh", "--format", "json", cwd=tmp_path)
    assert rules(result) == ["GD003", "GD402", "GD410"] and result.returncode == 1
    missing = cli_in_process("lint", cwd=tmp_path)
    assert missing.returncode == 2 and "give the files or folders to lint" in missing.stderr


def test_a_wrong_setting_is_one_line_naming_the_file(tmp_path):
    for table, says in (('selekt = ["GD4"]\n', "no setting 'selekt'"), ('fail-on = "sometimes"\n', "fail-on"),
                        ("select = 4\n", "select must be a list of strings"), ("select = [\n", "cannot read")):
        (tmp_path / "pyproject.toml").write_text("[tool.gpudoctor]\n" + table)
        result = cli_in_process("lint", str(FIXTURES / "jobs" / "bad.env"), cwd=tmp_path)
        assert result.returncode == 2 and says in result.stderr and "pyproject.toml" in result.stderr
        assert len(result.stderr.splitlines()) == 1
