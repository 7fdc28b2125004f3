"""Output fits the terminal: every command rendered at COLUMNS=80 keeps its lines within 80 columns, cuts nothing
(no `name…`), and never breaks a URL or a command across lines. JSON, Prometheus, YAML, Markdown and the contents
of a file (a .env diff) are exempt. Also: NO_COLOR / FORCE_COLOR / --no-color, `-` as stdout, --help texts."""

from __future__ import annotations

import argparse
import json
import re

import pytest
import yaml
from conftest import FIXTURES

from gpudoctor.catalog import load_catalog
from gpudoctor.cli import build_parser
from gpudoctor.render.terminal import command_line, fix_block, width, wrap

WIDTH = 80
MACHINES = sorted((FIXTURES / "machines").glob("*.json"))
JOBS = FIXTURES / "jobs"
CUT = re.compile(r"\w…(?=\s|$)")
URL = re.compile(r"https?://[^\s`'\"()<>]+")


@pytest.fixture(autouse=True)
def eighty_columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)


def assert_fits(text: str, whole=(), columns: int = WIDTH) -> None:
    """Each line within WIDTH, unless it is one unbreakable thing: a `$ command`, a `command in backticks` or a
    single token (a URL);
    nothing cut with `…`; every string of `whole` (commands, URLs) on one line."""
    lines = text.splitlines()
    for line in lines:
        assert not CUT.search(line), f"cut: {line!r}"
        if len(line) > columns:
            unbreakable = re.fullmatch(r" *(\$ .*|\S+|\S?`[^`]+`\S*)", line)
            assert unbreakable, f"{len(line)} columns: {line!r}"
            assert not line.endswith("\\"), line
    for item in whole:
        assert any(item in line for line in lines), f"broken across lines: {item!r}"


def fix_commands(report: dict) -> list:
    return [command for finding in report["findings"] for command in (finding.get("fix") or {}).get("commands", [])]


@pytest.mark.parametrize("machine", MACHINES, ids=lambda path: path.stem)
def test_check_fits(run_cli, machine):
    args = ["check", "--snapshot", machine, "--env-file", JOBS / "job.sbatch", "--ds-config",
            FIXTURES / "ds_configs" / "zero2_offload.json", "--model", "7B"]
    _, text, _ = run_cli(*args)
    _, data, _ = run_cli(*args, "--format", "json")
    commands = fix_commands(json.loads(data))
    assert_fits(text, commands)


@pytest.mark.parametrize("report", sorted((FIXTURES / "reports").glob("collect_env*.txt")), ids=lambda p: p.stem)
def test_check_from_a_report_fits(run_cli, report):
    _, text, _ = run_cli("check", "--from", report)
    _, data, _ = run_cli("check", "--from", report, "--format", "json")
    assert_fits(text, fix_commands(json.loads(data)))


@pytest.mark.parametrize("job", sorted(p for p in JOBS.iterdir() if p.is_file()), ids=lambda path: path.name)
def test_lint_fits(run_cli, job):
    _, text, _ = run_cli("lint", job)
    _, data, _ = run_cli("lint", job, "--format", "json")
    assert_fits(text, fix_commands(json.loads(data)))


K8S = FIXTURES / "launch" / "k8s"


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_a_fix_block_is_never_wrapped_and_the_rest_fits(run_cli, monkeypatch, columns):
    """GD901-GD903's YAML, pasted from the terminal, is the YAML of the fix at any width; the prose around it fits."""
    monkeypatch.setenv("COLUMNS", str(columns))
    for job in (K8S / "pytorchjob_efa_env_no_device.yaml", K8S / "job_dataparallel.yaml"):
        _, text, _ = run_cli("lint", job)
        _, data, _ = run_cli("lint", job, "--format", "json")
        blocks = [fix_block(f["fix"]["summary"])[1] for f in json.loads(data)["findings"]
                  if "\n" in (f.get("fix") or {}).get("summary", "")]
        assert len(blocks) >= 1
        lines, shown = text.splitlines(), set()
        for block in blocks:
            assert isinstance(yaml.safe_load("\n".join(block)), dict)
            first = next(line for line in lines if line.endswith(block[0]) and not line[:-len(block[0])].strip())
            indent = first[:-len(block[0])]
            assert "\n".join(indent + line for line in block) in text, "a fix block was broken"
            assert indent == " " * 10 or len(indent) + max(map(len, block)) > columns - 10
            shown |= {indent + line for line in block}
        assert_fits("\n".join(line for line in lines if line not in shown), columns=columns)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_one_layout_the_name_on_its_own_line(run_cli, monkeypatch, columns):
    """Mark, ID and name alone on their line, the message below them, at every width."""
    monkeypatch.setenv("COLUMNS", str(columns))
    _, text, _ = run_cli("lint", K8S / "job_dataparallel.yaml")
    _, data, _ = run_cli("lint", K8S / "job_dataparallel.yaml", "--format", "json")
    for finding in json.loads(data)["findings"]:
        heads = [line for line in text.splitlines() if f" {finding['rule']} " in line + " "]
        assert heads[0].split() == [heads[0].split()[0], finding["rule"], finding["name"]]
        after = text.splitlines()[text.splitlines().index(heads[0]) + 1]
        assert after.startswith("     ") and not after.startswith("      ")


INTERNAL = re.compile(r"\bno \w+ facts\b|no probe ran|\benv\.[A-Z]|\b(nvcc|nvml|host)\.[a-z]|process_peak_rss|"
                      r"quick: not imported|rules/\w+\.toml")


@pytest.mark.parametrize("argv", [
    ["check", "--from", FIXTURES / "logs" / "nccl_efa_plugin_failed.log"],
    ["check", "--snapshot", FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json", "--select", "GD3"],
    ["lint", JOBS / "fixable.env"], ["lint", K8S / "job_dataparallel.yaml"],
    ["estimate", "--model", "7B", "--gpu", "Voodoo 3dfx"],
], ids=lambda argv: " ".join(str(a).rsplit("/", 1)[-1] for a in argv))
def test_no_internal_words(run_cli, argv):
    """Users read what was not looked at and what is not set, never fact paths or the project's files."""
    _, out, err = run_cli(*argv)
    assert not INTERNAL.search(out + err), INTERNAL.search(out + err)


@pytest.mark.parametrize("columns", [60, 80, 120])
def test_fixs_notes_on_stderr_break_at_spaces(run_cli, monkeypatch, tmp_path, columns):
    monkeypatch.setenv("COLUMNS", str(columns))
    env = tmp_path / "job.env"
    env.write_text((JOBS / "fixable.env").read_text())
    _, _, err = run_cli("fix", "--snapshot", FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json", "--env-file",
                        env, "--write-env", tmp_path / "other.env", "--dry-run")
    assert "by hand" in err
    assert_fits(err.replace(str(tmp_path), "T"), columns=columns)


def test_fleet_fits(run_cli):
    nodes = sorted((FIXTURES / "fleet").glob("*.json"))
    _, text, _ = run_cli("fleet", *nodes)
    assert_fits(text)


def test_fix_left_for_you_fits_and_keeps_commands_whole(run_cli):
    machine = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"
    env = JOBS / "fixable.env"
    _, data, _ = run_cli("check", "--snapshot", machine, "--env-file", env, "--format", "json")
    _, _, err = run_cli("fix", "--snapshot", machine, "--env-file", env, "--write-env", env, "--dry-run")
    assert "left for you" in err
    assert_fits(err, fix_commands(json.loads(data)))


@pytest.mark.parametrize("rule", load_catalog(), ids=lambda rule: rule.id)
def test_explain_fits_and_keeps_urls_and_commands_whole(run_cli, rule):
    _, text, _ = run_cli("explain", rule.id)
    docs = " ".join(str(rule.docs.get(key, "")) for key in ("what", "why", "fix"))
    spans = [span for span in re.findall(r"`([^`\n]+)`", docs)]
    references = " ".join(rule.docs.get("references", []))
    assert_fits(text, spans + URL.findall(docs) + URL.findall(references))


def test_rules_and_estimate_fit(run_cli):
    for argv in (["rules"], ["estimate", "--model", FIXTURES / "models" / "llama-2-7b.config.json", "--gpu", "4090"],
                 ["estimate", "--model", "7B", "--gpu", "A100 40GB", "--format", "rich"]):
        code, text, _ = run_cli(*argv)
        assert code == 0
        assert_fits(re.sub(r"\x1b\[[0-9;]*m", "", text))


def _parsers(parser, path=()):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


@pytest.mark.parametrize("path", [path for path, _ in _parsers(build_parser())], ids=" ".join)
def test_help_describes_every_option_and_shows_examples(run_cli, path):
    parser = dict(_parsers(build_parser()))[path]
    assert parser.description, "no description"
    assert parser.epilog and parser.epilog.startswith("examples:")
    assert len([line for line in parser.epilog.splitlines() if line.startswith("  ") and "#" not in line]) >= 2
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        assert action.help, f"{action.option_strings or action.dest} has no help"
        shown = action.default not in (None, False, "", argparse.SUPPRESS) and not isinstance(action.default, list)
        if shown:
            assert "default" in action.help, f"{action.option_strings}: its default {action.default!r} is not said"
    with pytest.raises(SystemExit):
        run_cli(*path, "--help")


def test_help_fits(run_cli, capsys):
    for path, _ in _parsers(build_parser()):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*path, "--help"])
        assert_fits(capsys.readouterr().out)


# --- colour --------------------------------------------------------------------------------------------

SNAP = FIXTURES / "machines" / "a100-driver470-cu121.json"
ANSI = "\x1b["


@pytest.mark.parametrize("argv,env,coloured", [
    ([], {}, False),                                    # piped: no colour
    ([], {"FORCE_COLOR": "1"}, True),                   # FORCE_COLOR forces it
    (["--format", "rich"], {}, True),                   # asked for
    (["--format", "rich"], {"NO_COLOR": "1"}, False),   # NO_COLOR wins, also over --format rich
    ([], {"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
    (["--no-color"], {"FORCE_COLOR": "1"}, False),
    (["--format", "rich", "--no-color"], {}, False),
    ([], {"NO_COLOR": ""}, False),                      # empty NO_COLOR is unset (no-color.org)
])
def test_colour(run_cli, monkeypatch, argv, env, coloured):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    code, out, _ = run_cli("check", "--snapshot", SNAP, *argv)
    assert code == 1 and (ANSI in out) == coloured


def test_explain_and_estimate_honour_no_color(run_cli, monkeypatch):
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert ANSI in run_cli("explain", "GD101")[1]
    assert ANSI not in run_cli("explain", "GD101", "--no-color")[1]
    monkeypatch.setenv("NO_COLOR", "1")
    assert ANSI not in run_cli("explain", "GD101")[1]
    assert ANSI not in run_cli("estimate", "--model", "7B", "--gpu", "4090", "--format", "rich")[1]


@pytest.mark.parametrize("command,expected", [
    (["rules"], 0), (["explain", "GD101"], 0), (["estimate", "--model", "7B", "--gpu", "4090"], 0),
    (["check", "--snapshot", SNAP], 1),  # its driver 470 is too old: GD101
    (["bench", "train", "--help"], 0)])
def test_no_color_and_debug_are_accepted_after_the_subcommand(run_cli, command, expected):
    try:
        code, _, err = run_cli(*command, "--no-color", "--debug")
    except SystemExit as exit:  # --help
        code, err = exit.code, ""
    assert code == expected and "unrecognized" not in err, err


# --- `-` is standard output ----------------------------------------------------------------------------

def test_dash_is_stdout(run_cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli("snapshot", "--from", FIXTURES / "reports" / "collect_env_torch15_pip.txt", "-o", "-")
    assert code == 0 and json.loads(out)["schema"] == "gpudoctor.snapshot/1"
    code, out, _ = run_cli("check", "--snapshot", SNAP, "--output", "-", "--format", "json")
    assert code == 1 and json.loads(out)["findings"]
    assert not (tmp_path / "-").exists()


# --- the layout helpers --------------------------------------------------------------------------------

def test_wrap_breaks_at_spaces_only_and_keeps_backticks_together():
    text = "run `docker run --ipc=host --shm-size=16g` then read https://example.org/" + "a" * 90
    lines = wrap(text, 30, "", "  ")
    assert "`docker run --ipc=host --shm-size=16g`" in lines[1]
    assert lines[-1].strip().startswith("https://example.org/")


def test_a_command_moves_left_rather_than_breaking():
    assert command_line("ls -l", 40, "          $ ") == "          $ ls -l"
    long = "pip install torch --index-url https://download.pytorch.org/whl/cu118"
    assert command_line(long, 60, "          $ ") == "   $ " + long


def test_width_comes_from_columns_else_80(monkeypatch):
    assert width() == 80
    monkeypatch.setenv("COLUMNS", "120")
    assert width() == 120
    monkeypatch.setenv("COLUMNS", "banana")
    assert width() == 80
