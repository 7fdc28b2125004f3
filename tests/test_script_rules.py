"""GD601–GD603 and GD004 end to end: fixture scripts (seed patterns, tricky cases, real scripts) through the reader,
the engine and the CLI (`gpudoctor lint FILE.py`, `gpudoctor check --snapshot … --script FILE`)."""

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, cli_in_process

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot

SCRIPTS = FIXTURES / "scripts"
REAL = SCRIPTS / "real"
LINT_RULES = [rule for rule in load_catalog() if not rule.host]
SCRIPT_RULES = {"GD003", "GD004", "GD601", "GD602", "GD603", "GD618", "GD619", "GD620"}


def lint(*paths: Path, facts=None):
    snapshot = Snapshot(facts=dict(facts or {"env": {}}), source={"kind": "files", "paths": []})
    for path in paths:
        read_file(path, snapshot)
    return snapshot, evaluate(snapshot, LINT_RULES + [r for r in load_catalog() if r.id in ("GD201", "GD202")])


def verdict(report) -> set:
    """(rule, severity, line) of every script finding, and of the further lines a GD601 finding lists."""
    return {(f.rule, str(f.severity), line) for f in report.findings if f.rule in SCRIPT_RULES
            for line in [f.location.line if f.location else None] + list(f.evidence.get("other_lines", []))}


# (file, expected findings of the script rules: (rule, severity under lint, line))
EXPECTED = [
    # the seeds' patterns
    ("seed_000_nemo_single_gpu_unguarded.py", {("GD601", "error", 35), ("GD603", "info", 35)}),
    ("seed_000_nemo_single_gpu_fixed.py", set()),
    ("seed_000_nemo_guarded_not_direct.py", {("GD603", "info", 20)}),
    ("seed_003_remote_training.py", set()),
    ("seed_003_late_visible_devices.py", {("GD602", "warning", 16)}),
    # tricky cases
    ("guard_below_spawn.py", {("GD601", "error", 13)}),
    ("main_called_unguarded.py", {("GD601", "error", 11)}),
    ("never_called.py", set()),
    ("dataloader_module_level.py", {("GD601", "warning", 16), ("GD601", "warning", 19)}),
    ("lightning_strategies.py", {("GD601", "error", 11)}),
    ("reversed_guard.py", set()),
    ("workers_from_kwargs_and_config.py", {("GD601", "warning", line) for line in (29, 31, 33, 35, 37)}),
    ("suppressed.py", {("GD004", "warning", 9)}),
    # bad input
    ("syntax_error.py", {("GD003", "error", 3)}),
    ("python2.py", {("GD003", "error", 3)}),
    ("invalid_utf8.py", {("GD003", "error", 4), ("GD601", "error", 5)}),
]

# Real scripts (structural re-creations, sources in fixtures/scripts/real/README.md) and their verdicts.
REAL_EXPECTED = [
    ("pytorch_examples_imagenet_main.py", set()),
    ("pytorch_examples_mnist_hogwild_main.py", set()),
    ("cs554_ddp_pretrain.py", set()),
    ("llm_test_launcher.py", set()),
    ("gordon_nemo_peft_execution.py", set()),
    ("lightning_app_multi_node_train.py", set()),
    ("transformer_arithmetic_train.py", set()),
    ("data_process_pool.py", {("GD601", "warning", 13)}),
    ("pybullet_t1_late_visible_devices.py", {("GD602", "warning", 12)}),
    ("ai_fit_checker.py", set()),
    ("dinov3_train_cls_head.py", set()),
    ("chatbot_training_setup.py", set()),
    ("residualflows_gpu94_fragment.py", set()),
    ("pytorch_examples_dcgan_main.py", {("GD601", "warning", 27)}),
    ("pytorch_examples_vae_main.py", set()),
    ("yangkky_mnist_distributed.py", {("GD620", "warning", 37)}),
]


@pytest.mark.parametrize("name,expected", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_fixture_verdicts(name, expected):
    _, report = lint(SCRIPTS / name)
    assert verdict(report) == expected
    assert not [f for f in report.findings if "crashed" in f.message]


@pytest.mark.parametrize("name,expected", REAL_EXPECTED, ids=[e[0] for e in REAL_EXPECTED])
def test_real_script_verdicts(name, expected):
    _, report = lint(REAL / name)
    assert verdict(report) == expected


def test_every_real_script_is_listed_with_its_source():
    readme = (REAL / "README.md").read_text()
    files = sorted(p.name for p in REAL.glob("*.py"))
    assert files == sorted(name for name, _ in REAL_EXPECTED)
    for name in files:
        assert f"`{name}`" in readme
        assert "Structural re-creation" in (REAL / name).read_text().splitlines()[0]
    assert sum(1 for _, expected in REAL_EXPECTED if expected) >= 2  # with and without findings


def test_gd601_is_one_finding_per_script_listing_the_other_starts():
    _, report = lint(SCRIPTS / "workers_from_kwargs_and_config.py")
    [finding] = [f for f in report.findings if f.rule == "GD601"]
    assert finding.location.line == 29 and finding.evidence["other_lines"] == [31, 33, 35, 37]
    assert "4 more start(s) outside the guard: line(s) 31, 33, 35, 37" in finding.message


def test_gd601_reports_the_most_severe_start_of_a_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch.multiprocessing as mp\nfrom torch.utils.data import DataLoader\n\n"
                      "loader = DataLoader(range(8), num_workers=2)\nfor batch in loader:\n    pass\n"
                      "mp.spawn(print, nprocs=2)\n")
    _, report = lint(script)
    [finding] = [f for f in report.findings if f.rule == "GD601"]
    assert (str(finding.severity), finding.location.line, finding.evidence["other_lines"]) == ("error", 7, [5])


def test_gd601_message_names_call_path_and_start_methods():
    _, report = lint(SCRIPTS / "main_called_unguarded.py")
    [finding] = [f for f in report.findings if f.rule == "GD601"]
    assert "module level line 18 → main() line 15 → launch() line 11" in finding.message
    assert "spawn" in finding.message
    assert finding.location.path.endswith("main_called_unguarded.py") and finding.location.column == 5
    assert finding.evidence["call_path"] == ["<module>:18", "main:15", "launch:11"]
    _, report = lint(SCRIPTS / "dataloader_module_level.py")
    message = [f for f in report.findings if f.rule == "GD601"][0].message
    assert "forkserver" in message and "3.14" in message and "macOS" in message


def test_gd601_severity_follows_the_machine():
    linux_312 = {"env": {}, "host": {"os": "Linux 6.1.0", "python": "3.12.3"}}
    _, report = lint(SCRIPTS / "dataloader_module_level.py", facts=linux_312)
    assert {str(f.severity) for f in report.findings if f.rule == "GD601"} == {"info"}
    mac = {"env": {}, "host": {"os": "macOS 14.5", "python": "3.12.3"}}
    _, report = lint(SCRIPTS / "dataloader_module_level.py", facts=mac)
    assert {str(f.severity) for f in report.findings if f.rule == "GD601"} == {"error"}
    py314 = {"env": {}, "host": {"os": "Linux 6.8"}, "torch": {"python_version": "3.14.0"}}
    _, report = lint(SCRIPTS / "dataloader_module_level.py", facts=py314)
    assert {str(f.severity) for f in report.findings if f.rule == "GD601"} == {"error"}


def test_seed_003_requests_feed_gd201():
    snapshot, _ = lint(SCRIPTS / "seed_003_late_visible_devices.py")
    bf16 = snapshot.facts["requests"]["bf16"]
    assert [(r["line"], r["what"]) for r in bf16] == [(17, "TrainingArguments(bf16=True)")]
    snapshot.facts["nvml"] = {"status": "ok", "gpus": [{"name": "Tesla V100-SXM2-16GB", "cc": "7.0"}]}
    report = evaluate(snapshot, [r for r in load_catalog() if r.id == "GD201"])
    [finding] = report.findings
    assert str(finding.severity) == "error" and "seed_003_late_visible_devices.py:17" in finding.message
    # the capability-based choice of seed 003 is no request
    snapshot, _ = lint(SCRIPTS / "seed_003_remote_training.py")
    assert snapshot.facts["requests"]["bf16"] == []
    assert [r["count"] for r in snapshot.facts["requests"]["workers"]] == [4]


def test_one_bad_file_does_not_stop_the_others():
    snapshot, report = lint(SCRIPTS / "syntax_error.py", SCRIPTS / "guard_below_spawn.py")
    assert [i["path"] for i in snapshot.facts["inputs"]] == [str(SCRIPTS / "syntax_error.py")]
    assert {f.rule for f in report.findings} >= {"GD003", "GD601"}
    assert [s["path"] for s in snapshot.facts["scripts"]] == [str(SCRIPTS / "guard_below_spawn.py")]


def test_script_facts_survive_a_snapshot_round_trip(tmp_path):
    from gpudoctor.snapshot import load

    snapshot, before = lint(SCRIPTS / "main_called_unguarded.py")
    target = tmp_path / "snap.json"
    target.write_text(json.dumps(snapshot.to_json()))
    after = evaluate(load(str(target)), LINT_RULES)
    assert verdict(after) == verdict(before)


# ---------------------------------------------------------------- the CLI, as a user runs it --------------------
def cli(*args, cwd=ROOT):
    return cli_in_process(*args, cwd=cwd)  # exit codes and output as a shell sees them (no process boundary tested)


def test_lint_json_end_to_end_and_exit_codes():
    result = cli("lint", SCRIPTS / "main_called_unguarded.py", "--format", "json")
    assert result.returncode == 1, result.stderr
    data = json.loads(result.stdout)
    [finding] = [f for f in data["findings"] if f["rule"] == "GD601"]
    assert finding["severity"] == "error"
    assert finding["location"] == {"path": str(SCRIPTS / "main_called_unguarded.py"), "line": 11, "column": 5}
    assert "→" in finding["message"] and finding["fix"]["applicability"] == "display-only"

    result = cli("lint", SCRIPTS / "reversed_guard.py", SCRIPTS / "never_called.py", "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["findings"] == []

    result = cli("lint", SCRIPTS / "dataloader_module_level.py", "--format", "json")
    assert result.returncode == 0  # warnings only
    result = cli("lint", SCRIPTS / "dataloader_module_level.py", "--format", "json", "--fail-on", "warning")
    assert result.returncode == 1

    result = cli("lint", SCRIPTS / "syntax_error.py", SCRIPTS / "guard_below_spawn.py", "--format", "json")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    data = json.loads(result.stdout)
    gd003 = [f for f in data["findings"] if f["rule"] == "GD003"]
    assert gd003[0]["location"]["line"] == 3 and gd003[0]["location"]["column"]
    assert any(f["rule"] == "GD601" for f in data["findings"])

    result = cli("lint", SCRIPTS / "guard_below_spawn.py", "--ignore", "GD601", "--format", "json")
    assert result.returncode == 0

    result = cli("lint", SCRIPTS / "no_such_file.py")
    assert result.returncode == 2 and "no such file" in result.stderr


def test_lint_plain_output_shows_location_and_path():
    result = cli("lint", SCRIPTS / "seed_000_nemo_single_gpu_unguarded.py", "--format", "plain")
    assert result.returncode == 1
    assert "GD601" in result.stdout and "GD603" in result.stdout and "direct=True" in result.stdout


def test_lint_bad_inputs_never_traceback(tmp_path):
    (tmp_path / "deep.py").write_text("x = " + "(" * 1000 + ")" * 1000 + "\n")
    (tmp_path / "chain.py").write_text("x = " + " + ".join(["a"] * 10_000) + "\n")
    (tmp_path / "bytes.py").write_bytes(b"\xff\xfe\x00\x01garbage\x00")
    (tmp_path / "py2.py").write_text("print 'hello'\n")
    (tmp_path / "empty.py").write_text("")
    result = cli("lint", *sorted(tmp_path.iterdir()), "--format", "json")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    data = json.loads(result.stdout)
    unreadable = {Path(f["location"]["path"]).name for f in data["findings"] if f["rule"] == "GD003"}
    assert unreadable == {"deep.py", "chain.py", "bytes.py", "py2.py"}


def test_check_with_script_on_a_recorded_t4():
    snapshot = FIXTURES / "machines" / "t4-cu121.json"
    result = cli("check", "--snapshot", snapshot, "--script", SCRIPTS / "seed_003_late_visible_devices.py",
                 "--format", "json", "--select", "GD2,GD6")
    assert result.returncode == 1, result.stderr
    findings = {f["rule"]: f for f in json.loads(result.stdout)["findings"]}
    assert findings["GD201"]["severity"] == "error" and "bf16=True" in findings["GD201"]["message"]
    assert findings["GD602"]["severity"] == "warning"
    result = cli("check", "--snapshot", snapshot, "--script", "missing.py")
    assert result.returncode == 2 and "missing.py" in result.stderr


def test_pre_commit_hook_definition():
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == "gpudoctor-lint"]
    assert hook["entry"] == "gpudoctor lint" and hook["language"] == "python" and "python" in hook["types"]
