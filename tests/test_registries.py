"""One registry per kind of input and output: the pasted formats (gpudoctor.ingest.registry), the output formats
(gpudoctor.render.FORMATS) and the commands (gpudoctor.cli.COMMANDS). Every list of them elsewhere, in help texts,
messages, docs and the MCP tools' descriptions, is held against its registry here."""

import argparse
import ast
import io
import json
import re
import sys
import typing

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
from record_docs import PAGES, blocks  # noqa: E402  (tools/ is no package)

from gpudoctor.cli import COMMANDS, build_parser  # noqa: E402
from gpudoctor.ingest import registry  # noqa: E402
from gpudoctor.ingest.report import ParsedReport  # noqa: E402
from gpudoctor.ingest.source import _nothing  # noqa: E402
from gpudoctor.render import BY_NAME, FLEET_NAMES, FORMATS, NAMES, render_report  # noqa: E402


def subparser(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return parser


def option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


# --- pasted formats -------------------------------------------------------------------------------------------------
def builder_kinds() -> set:
    """The kinds the parsers of gpudoctor/ingest/ give their Builder (`Builder(name, lines, "nvcc")`)."""
    found = set()
    for path in (ROOT / "gpudoctor" / "ingest").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Builder" and len(node.args) == 3:
                found.add(node.args[2].value)
    return found


def test_every_parser_of_ingest_is_one_pasted_format():
    kinds = [fmt.kind for fmt in registry.FORMATS]
    assert len(kinds) == len(set(kinds)) == len({fmt.what for fmt in registry.FORMATS})
    assert set(kinds) == builder_kinds()
    for fmt in registry.FORMATS:
        parser = fmt.parser()
        assert callable(parser) and parser.__module__.startswith("gpudoctor.ingest.")
        assert fmt.markers and all(re.compile(m) and m[0] not in "^([ " for m in fmt.markers), fmt.kind


@pytest.mark.parametrize("fmt", registry.FORMATS, ids=lambda f: f.kind)
def test_each_pasted_format_is_named_wherever_formats_are_listed(fmt):
    from gpudoctor.mcpserver import tools

    from_help = option(subparser("check"), "--from").help
    snapshot_help = option(subparser("snapshot"), "--from").help
    nothing = _nothing([ParsedReport(kind="text", facts={}, evidence={}, missing=[], name="a.txt", lines=3)])
    described = typing.get_type_hints(tools.diagnose_text, include_extras=True)["text"].__metadata__[0].description
    for where, text in (("check --from's help", from_help), ("snapshot --from's help", snapshot_help),
                        ("the nothing-known line", nothing), ("the MCP tool diagnose_text", described)):
        assert fmt.what in text, f"{where} does not name {fmt.what}"
    reports = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    assert f"\n| {fmt.what} | {fmt.gives} |\n" in reports


def test_the_nothing_known_line_says_what_gpudoctor_reads():
    texts = [ParsedReport(kind="text", facts={}, evidence={}, missing=[], name=n, lines=k) for n, k in
             (("a.txt", 1), ("b.txt", 12))]
    assert _nothing(texts) == ("nothing gpudoctor knows in 1 line of a.txt; nothing gpudoctor knows in 12 lines of "
                               f"b.txt (it reads {registry.in_words()})")
    assert registry.in_words().endswith(", a training job's log, or a run's folder (every rank's logs and "
                                        "flight-recorder dumps)")


def test_the_registry_loads_no_parser():
    """The command line lists the formats at every start; reading the list loads no parser module."""
    import subprocess

    code = ("import sys; import gpudoctor.cli; print(sorted(m for m in sys.modules "
            "if m.startswith('gpudoctor.ingest.') and m != 'gpudoctor.ingest.registry'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


# --- output formats -------------------------------------------------------------------------------------------------
def test_the_commands_offer_the_registered_output_formats():
    for command in ("check", "lint"):
        assert tuple(option(subparser(command), "--format").choices) == NAMES
    assert tuple(option(subparser("fleet"), "--format").choices) == FLEET_NAMES
    assert FLEET_NAMES == tuple(fmt.name for fmt in FORMATS if fmt.fleet)
    output = (ROOT / "docs" / "output.md").read_text(encoding="utf-8")
    for fmt in FORMATS:
        assert f"| `{fmt.name}` | {fmt.what} |" in output


def test_every_report_renderer_is_registered():
    """A module of gpudoctor/render/ with a `render(report, stream, quiet)` of a Report is one output format."""
    modules = set()
    for path in (ROOT / "gpudoctor" / "render").glob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            arguments = [a.arg for a in node.args.args] if isinstance(node, ast.FunctionDef) else []
            if arguments[:3] == ["report", "stream", "quiet"]:
                modules.add(f"{path.stem}.{node.name}")
    assert modules == {fmt.write for fmt in FORMATS}


@pytest.mark.parametrize("name", NAMES)
def test_every_output_format_writes_a_report(name):
    from gpudoctor.catalog import rules_for_run
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    snapshot = Snapshot(facts={"env": {"NCCL_P2P_DISABLE": "1"}}, probes=[], source={"kind": "files", "paths": []})
    report = evaluate(snapshot, rules_for_run(["GD4"], [], (), host=False))
    stream = io.StringIO()
    render_report(report, name, stream)
    text = stream.getvalue()
    assert text.strip() or name == "drain-reason" and not report.findings  # a drain reason only where one fired
    if name == "json":
        assert json.loads(text)["schema"].startswith("gpudoctor.report/")
    assert ("\x1b[" in text) == (name == "rich")
    assert BY_NAME[name].human == (name in ("rich", "plain", "markdown"))


def test_the_library_refuses_a_format_that_is_not_registered():
    import gpudoctor

    snapshot = gpudoctor.collect(gpudoctor.Request(files=[str(ROOT / "fixtures" / "jobs" / "bad.env")]))
    report = gpudoctor.evaluate(snapshot)
    with pytest.raises(ValueError, match="no output format 'yaml'"):
        gpudoctor.format_report(report, "yaml")


# --- commands -------------------------------------------------------------------------------------------------------
def test_every_command_module_is_registered_once():
    """A module of gpudoctor/cli/ with `add_parser` is a command, listed in COMMANDS (no other list adds one)."""
    defining = {path.stem for path in (ROOT / "gpudoctor" / "cli").glob("*.py")
                if any(isinstance(node, ast.FunctionDef) and node.name == "add_parser"
                       for node in ast.parse(path.read_text(encoding="utf-8")).body)}
    assert sorted(set(COMMANDS.values())) == sorted(defining)
    init = (ROOT / "gpudoctor" / "cli" / "__init__.py").read_text(encoding="utf-8")
    assert "COMMANDS.append" not in init and "COMMANDS +=" not in init


def test_every_command_has_examples_in_its_help():
    from gpudoctor.cli.helptext import EXAMPLES

    top = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(top.choices) <= set(EXAMPLES)


# --- generated tables in the docs -----------------------------------------------------------------------------------
def test_the_registries_tables_in_the_docs_are_generated():
    found = {}
    for page in PAGES:
        for function, shown, now in blocks(page):
            found[function] = page.name
            assert shown == now, f"{page.name}: the table of {function}() is stale: python tools/record_docs.py"
    assert found == {"gpudoctor.ingest.registry.markdown_table": "reports.md",
                     "gpudoctor.render.markdown_table": "output.md"}
