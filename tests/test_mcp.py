"""`gpudoctor mcp`: one real server process for the module, driven through the MCP SDK's own stdio client
(ClientSession over stdio_client); every tool's result is compared with the command line's `--format json` on the
same input, bad input is a one-line tool error, secrets never come back."""

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT, required_or_skip

from gpudoctor.data import loads_toml

SECRET = "hf_Zq8sEcReT0123456789"  # a token in the server's environment and in the inputs below
LOG = FIXTURES / "logs" / "torchrun_watchdog_timeout.log"
REPORT = FIXTURES / "reports" / "collect_env_rtx3090_driver470_cu121.txt"
ENV = {"PYTHONPATH": str(ROOT), "HF_TOKEN": SECRET}


def test_on_python_3_9_the_command_says_so_and_exits_2(run_cli, monkeypatch):
    monkeypatch.setattr(sys, "version_info", (3, 9, 18, "final", 0))
    code, out, err = run_cli("mcp")
    assert code == 2 and out == ""
    assert err.startswith("gpudoctor: error: ") and "Python 3.10" in err and len(err.splitlines()) == 1


def test_the_rest_of_the_cli_never_imports_the_sdk():
    script = ("import contextlib, io, sys\nfrom gpudoctor.cli import main\n"
              "for argv in (['mcp', '--help'], ['rules'], ['lint', 'fixtures/jobs/bad.env']):\n"
              "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
              "        main(argv)\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'pydantic')))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def allowed(tmp_path_factory):
    """A folder the module's server may read besides the checkout (its --root)."""
    return tmp_path_factory.mktemp("allowed")


def _session(portal, stack, *options, env=None):
    """call(tool, arguments) → (is_error, text, structured) on a `gpudoctor mcp OPTIONS` started for `stack`."""
    if sys.version_info < (3, 10):
        pytest.skip("the MCP SDK 2.x needs Python 3.10")
    try:
        from mcp import ClientSession, StdioServerParameters, stdio_client
    except ImportError:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", "the MCP SDK is not installed (pip install '.[test]')")
    server = StdioServerParameters(command=sys.executable, args=["-m", "gpudoctor", "mcp", *map(str, options)],
                                   env={**os.environ, **ENV, **(env or {})}, cwd=str(ROOT))
    streams = stack.enter_context(portal.wrap_async_context_manager(stdio_client(server)))
    session = stack.enter_context(portal.wrap_async_context_manager(ClientSession(*streams)))
    portal.call(session.initialize)

    def run(name, arguments=None):
        if name == "list_tools":
            return portal.call(session.list_tools).tools
        if name == "read":
            return portal.call(session.read_resource, arguments).contents[0].text
        if name == "list_prompts":
            return portal.call(session.list_prompts).prompts
        if name == "prompt":
            return portal.call(session.get_prompt, *arguments).messages
        result = portal.call(session.call_tool, name, arguments or {})
        return result.is_error, result.content[0].text, result.structured_content

    return run


@pytest.fixture(scope="module")
def call(allowed):
    """call(tool, arguments) → (is_error, text, structured) on one `gpudoctor mcp` for the whole module, which may
    read the checkout and `allowed`."""
    pytest.importorskip("anyio")
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal() as portal, contextlib.ExitStack() as stack:
        yield _session(portal, stack, "--root", ROOT, "--root", allowed)


@pytest.fixture
def cli_json(run_cli, monkeypatch):
    """The command line's JSON for the same input, in the server's environment."""
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)

    def run(*argv, stdin=None):
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", open(stdin, encoding="utf-8"))
        code, out, err = run_cli(*argv, "--format", "json")
        assert code in (0, 1), err
        return json.loads(out)

    return run


def same_report(tool, cli):
    """Equal but for the times gpudoctor and NVML took (and each probe took: live checks run twice)."""
    for document in (tool, cli):
        document.pop("seconds")
        document.pop("timings")
        for probe in document["probes"]:
            probe.pop("seconds")
    assert tool == cli


def ok(result):
    is_error, text, structured = result
    assert not is_error, text
    assert json.loads(text) == structured
    return structured


@pytest.mark.slow
def test_the_tools_are_read_only_and_their_inputs_described(call):
    tools = {tool.name: tool for tool in call("list_tools")}
    assert set(tools) == {"diagnose_text", "check_machine", "lint_files", "estimate_memory", "explain_rule",
                          "preview_fix"}
    for tool in tools.values():
        assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
        assert "Read-only" in tool.description, tool.name
        for name, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{tool.name}.{name}"
    assert "python" not in json.dumps(tools["check_machine"].input_schema).lower()  # no interpreter to run
    assert all(tool.title and tool.title != tool.name for tool in tools.values())
    assert tools["diagnose_text"].input_schema["properties"]["text"]["maxLength"] == 2_000_000


def test_diagnose_text_is_check_from(call, cli_json):
    for pasted in (LOG, REPORT):
        tool = ok(call("diagnose_text", {"text": pasted.read_text(encoding="utf-8")}))
        assert tool["findings"] and tool["source"]["paths"] == ["<stdin>"]
        same_report(tool, cli_json("check", "--from", "-", stdin=pasted))
    tool = ok(call("diagnose_text", {"paths": [str(LOG)], "select": ["GD42"]}))
    assert [finding["rule"] for finding in tool["findings"]] == ["GD424"]
    same_report(tool, cli_json("check", "--from", LOG, "--select", "GD42"))


def test_diagnose_text_judges_a_snapshot_as_check_snapshot_does(call, cli_json):
    """A `gpudoctor snapshot` pasted or given by path is the recorded machine, not a report that says nothing (it
    came back as 0 findings and every rule unknown)."""
    machine = FIXTURES / "machines" / "k8s-pod-a100x8.json"
    cli = cli_json("check", "--snapshot", machine)
    assert {"GD502", "GD503", "GD505", "GD506"} <= {finding["rule"] for finding in cli["findings"]}
    by_path = ok(call("diagnose_text", {"paths": [str(machine)]}))
    same_report(by_path, cli_json("check", "--snapshot", machine))
    pasted = ok(call("diagnose_text", {"text": machine.read_text(encoding="utf-8")}))
    assert pasted["findings"] == by_path["findings"] and pasted["summary"] == by_path["summary"]
    with_log = ok(call("diagnose_text", {"paths": [str(machine), str(LOG)]}))
    same_report(with_log, cli_json("check", "--snapshot", machine, "--from", LOG))
    nodes = [str(FIXTURES / "fleet" / name) for name in ("dgx-01.json", "dgx-02.json", "dgx-03.json")]
    fleet = ok(call("diagnose_text", {"paths": nodes}))
    expected = cli_json("fleet", *nodes)
    for document in (fleet, expected):
        document.pop("seconds")
    assert fleet == expected and fleet["schema"] == "gpudoctor.fleet/1" and fleet["findings"]


def test_the_tools_declare_the_published_schemas_as_output_schema(call):
    """The SDK's client validates every structured result against the tool's outputSchema: these calls would raise
    if a document did not fit its published schema."""
    tools = {tool.name: tool for tool in call("list_tools")}
    report = json.loads((ROOT / "docs" / "schemas" / "report.schema.json").read_text())
    assert tools["lint_files"].output_schema["$id"] == report["$id"]
    assert tools["lint_files"].output_schema["properties"] == report["properties"]
    assert [schema["title"] for schema in tools["diagnose_text"].output_schema["anyOf"]] == [
        "gpudoctor.report/1", "gpudoctor.fleet/1"]
    assert tools["estimate_memory"].output_schema["title"] == "gpudoctor.estimate/1"
    ok(call("lint_files", {"paths": ["fixtures/jobs"], "detail": "findings"}))
    ok(call("diagnose_text", {"paths": [str(FIXTURES / "fleet" / name) for name in ("dgx-01.json", "dgx-03.json")]}))
    ok(call("estimate_memory", {"model": "7B", "gpu": "4090"}))


def test_detail_findings_is_the_findings_alone(call):
    """A log's report is mostly the rules that passed or could not be judged: findings-only is a fraction of it."""
    full = ok(call("diagnose_text", {"paths": [str(LOG)]}))
    short = ok(call("diagnose_text", {"paths": [str(LOG)], "detail": "findings"}))
    assert set(short) == {"schema", "tool", "source", "host", "summary", "findings"}
    assert short["findings"] == full["findings"] and short["summary"] == full["summary"]
    assert len(json.dumps(short)) < 0.5 * len(json.dumps(full))


def test_zero_stage_as_clients_send_it(call):
    as_text = ok(call("estimate_memory", {"model": "7B", "gpu": "A100 80GB", "zero_stage": "3", "world_size": "8"}))
    as_number = ok(call("estimate_memory", {"model": "7B", "gpu": "A100 80GB", "zero_stage": 3, "world_size": 8}))
    assert as_text == as_number and as_text["assumptions"]["zero_stage"] == 3


def test_the_prompts_chain_tools_that_exist(call):
    prompts = {prompt.name: prompt for prompt in call("list_prompts")}
    assert set(prompts) == {"multi_node_hang", "node_ready", "slow_run", "review_job_folder"}
    tools = {tool.name for tool in call("list_tools")}
    for name, prompt in prompts.items():
        assert prompt.title and prompt.description
        arguments = {argument.name: "fixtures/jobs" for argument in prompt.arguments or ()}
        (message,) = call("prompt", (name, arguments))
        text = message.content.text
        named = set(re.findall(r"\b([a-z]+_[a-z_]+)\b", text)) & tools
        assert len(named) >= 1 and "unknown" in text, (name, text)
        assert not set(re.findall(r"\b(?:call|Call) ([a-z_]+)", text)) - tools  # every tool it calls exists
        assert all(value in text for value in arguments.values())
    review = call("prompt", ("review_job_folder", {"folder": "jobs/"}))[0].content.text
    assert 'lint_files with paths ["jobs/"]' in review


def test_lint_files_is_lint(call, cli_json):
    paths = ["fixtures/jobs/bad.env", "fixtures/ds_configs/zero2_offload.json", "fixtures/launch/k8s"]
    tool = ok(call("lint_files", {"paths": paths}))
    assert {"GD304", "GD402"} <= {finding["rule"] for finding in tool["findings"]}
    same_report(tool, cli_json("lint", *paths))


def test_lint_files_takes_contents_as_lint_takes_the_files(call, cli_json):
    given = ["fixtures/jobs/bad.env", "fixtures/ds_configs/zero2_offload.json"]
    files = [{"name": name, "text": (ROOT / name).read_text(encoding="utf-8")} for name in given]
    by_text = ok(call("lint_files", {"files": files}))
    same_report(by_text, cli_json("lint", *given))
    mixed = ok(call("lint_files", {"paths": given[:1], "files": files[1:]}))
    assert mixed["findings"] == by_text["findings"]
    ghost = ok(call("lint_files", {"files": [{"name": "no/such/dir/.env", "text": "NCCL_P2P_LEVEL=nvl\n"}]}))
    assert [(f["rule"], f["location"]["path"]) for f in ghost["findings"]] == [("GD402", "no/such/dir/.env")]
    is_error, text, _ = call("lint_files", {"files": files + files[:1]})
    assert is_error and "same name" in text
    is_error, text, _ = call("lint_files", {"files": [{"name": "/etc/job.sbatch", "text": "python train.py\n"}]})
    assert is_error and "outside the folders this server may read" in text  # its script would be looked for there


def test_check_machine_is_check_of_this_interpreter(call, cli_json):
    arguments = {"script": ["fixtures/launch/train_ddp.py"], "ds_config": "fixtures/ds_configs/zero2_offload.json",
                 "model": "fixtures/models/qwen2.5-0.5b.config.json", "quick": True}
    tool = ok(call("check_machine", arguments))
    assert tool["source"]["kind"] == "live" and any(f["rule"] == "GD304" for f in tool["findings"])
    same_report(tool, cli_json("check", "--quick", "--script", arguments["script"][0], "--ds-config",
                               arguments["ds_config"], "--model", arguments["model"]))
    tool = ok(call("check_machine", {"select": ["GD4"], "quick": True}))
    assert all(rule.startswith("GD4") for rule in tool["passed"] + [f["rule"] for f in tool["findings"]])


def test_estimate_memory_is_estimate(call, cli_json):
    model = "fixtures/models/qwen2.5-0.5b.config.json"
    tool = ok(call("estimate_memory", {"model": model, "gpu": "A100 40GB", "world_size": 8, "zero_stage": 2,
                                       "precision": "fp16", "micro_batch": 4, "seq_len": 4096}))
    assert tool["schema"] == "gpudoctor.estimate/1" and tool["assumptions"]["zero_stage"] == 2
    assert tool == cli_json("estimate", "--model", model, "--gpu", "A100 40GB", "--world-size", "8",
                            "--zero-stage", "2", "--precision", "fp16", "--micro-batch", "4", "--seq-len", "4096")


def test_explain_rule_and_the_catalog_are_explain_and_rules(call, cli_json):
    tool = ok(call("explain_rule", {"rule_id": "gd304"}))
    assert tool["docs"]["fix"] and {example["fires"] for example in tool["examples"]} == {True, False}
    assert tool == cli_json("explain", "GD304")
    assert json.loads(call("read", "gpudoctor://rules/GD304")) == tool
    assert json.loads(call("read", "gpudoctor://rules")) == cli_json("rules")


def test_the_message_atlas_is_a_resource(call):
    atlas = json.loads(call("read", "gpudoctor://messages"))
    assert atlas["schema"] == "gpudoctor.messages/1"
    data = [loads_toml(path.read_text(encoding="utf-8")) for path in (ROOT / "rules" / "messages").glob("*.toml")]
    expected = {(raw["id"], raw["trigger"], raw["rule"], len(raw.get("sample", ()))) for project in data
                for raw in project.get("message", ())}
    assert expected and {(m["id"], m["trigger"], m["rule"], len(m["samples"])) for m in atlas["messages"]} == expected
    assert all(sample["source"].startswith("https://") for m in atlas["messages"] for sample in m["samples"])


def test_preview_fix_is_fix_dry_run_and_writes_nothing(call, run_cli, allowed, monkeypatch):
    folder = allowed / "preview"
    folder.mkdir()
    env_file = folder / "job.env"
    shutil.copy(FIXTURES / "jobs" / "fixable.env", env_file)
    before = env_file.read_bytes()
    tool = ok(call("preview_fix", {"env_file": str(env_file), "quick": True}))
    assert "+NCCL_DEBUG=WARN" in tool["diff"]
    assert env_file.read_bytes() == before and os.listdir(folder) == ["job.env"]  # not even a lock file
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)
    code, out, _ = run_cli("fix", "--env-file", env_file, "--write-env", env_file, "--dry-run", "--quick")
    assert code == 0 and tool["diff"] == out


@pytest.mark.parametrize("name,arguments,says", [
    ("lint_files", {"paths": ["no/such.env"]}, "no such file"),
    ("lint_files", {"paths": []}, "nothing to lint"),
    ("lint_files", {"files": [{"name": "big.env", "text": "x" * 2_000_001}]}, "2000000"),
    ("diagnose_text", {}, "nothing to read"),
    ("diagnose_text", {"text": "\x00\x01\x02" * 100}, "<stdin>"),  # binary: nothing to read in it
    ("diagnose_text", {"text": "x" * 2_000_001}, "2000000"),
    ("check_machine", {"select": ["GX9"], "quick": True}, "matches no rule"),
    ("check_machine", {"script": ["no/train.py"]}, "no such file"),
    ("check_machine", {"script": ["/no/train.py"]}, "outside the folders this server may read"),
    ("estimate_memory", {"model": "seven billion"}, "seven billion"),
    ("estimate_memory", {"model": "7B", "zero_stage": 5}, "zero_stage"),
    ("explain_rule", {"rule_id": "GD999"}, "no rule 'GD999'"),
    ("preview_fix", {"env_file": "fixtures/jobs"}, "not a regular file"),
    ("diagnose_text", {"paths": ["fixtures/../../../../dev/zero"]}, "never /proc, /sys, /dev"),
    ("no_such_tool", {}, "no_such_tool"),
])
def test_bad_input_is_a_one_line_tool_error(call, name, arguments, says):
    is_error, text, structured = call(name, arguments)
    assert is_error and structured is None
    assert text.startswith("gpudoctor: error: ") and len(text.splitlines()) == 1, text
    assert says in text and "Traceback" not in text


def test_secrets_in_the_inputs_or_the_environment_never_come_back(call, allowed):
    log = LOG.read_text(encoding="utf-8").replace("[rank1]:[E1107 09:44:03.441268703",
                                                  f"HF_TOKEN={SECRET} [rank1]:[E1107 09:44:03.441268703", 1)
    is_error, text, _ = call("diagnose_text", {"text": log})
    assert not is_error and '"GD424"' in text and "HF_TOKEN=<redacted>" in text  # quoted, and hidden
    env_file = allowed / "secrets.env"
    env_file.write_text("WANDB_API_KEY=wandb0secret0value\nNCCL_DEBUG=INFO\n"
                        "HF_ENDPOINT=https://me:pa55word@hf.internal\n")
    results = [call("lint_files", {"paths": [str(env_file)]}),
               call("preview_fix", {"env_file": str(env_file), "quick": True}),
               call("check_machine", {"quick": True}), call("diagnose_text", {"text": f"token {SECRET}\n"})]
    assert "WANDB_API_KEY=<redacted>" in results[1][1]  # the diff's context line, hidden
    texts = [text] + [result[1] for result in results]
    for secret in (SECRET, "wandb0secret0value", "pa55word"):
        assert not [text for text in texts if secret in text]


@pytest.mark.slow
def test_the_exchange_in_the_docs_is_real(call):
    """docs/mcp.md shows one call and its result, the lists of rules shortened: the rest must be what comes back
    today (the counts of passed, unknown and not-applicable rules move as rules join the catalog)."""
    page = (ROOT / "docs" / "mcp.md").read_text(encoding="utf-8")
    arguments, shown = re.findall(r"```json\n(.*?)\n```", page.split("## A real exchange")[1], re.S)
    shown = json.loads(re.sub(r",\n\s*…", "", shown))
    result = ok(call("diagnose_text", json.loads(arguments)))
    for document in (shown, result):
        document.pop("seconds")
        for moving in ("passed", "unknown", "not_applicable"):
            document["summary"].pop(moving)
            document[moving] = document[moving][:len(shown[moving])]
    assert result == shown


@pytest.mark.slow
def test_a_call_past_its_deadline_is_a_tool_error_and_the_next_call_runs():
    """A tool call that never returns held the server-wide lock forever; every later call waited behind it."""
    pytest.importorskip("anyio")
    import time

    from anyio.from_thread import start_blocking_portal

    env = {"PYTHONPATH": f"{ROOT / 'tests' / 'faults'}{os.pathsep}{ROOT}", "GPUDOCTOR_TEST_HANG_RULE": "GD000"}
    with start_blocking_portal() as portal, contextlib.ExitStack() as stack:
        run = _session(portal, stack, "--call-timeout", "2", env=env)
        started = time.monotonic()
        is_error, text, _ = run("explain_rule", {"rule_id": "GD000"})
        assert is_error and text == "gpudoctor: error: explain_rule did not finish within 2 s (the server's " \
                                    "--call-timeout)"
        is_error, text, structured = run("explain_rule", {"rule_id": "GD401"})
        assert not is_error and structured["id"] == "GD401"
        assert time.monotonic() - started < 30


@pytest.mark.slow
@pytest.mark.parametrize("signum,code,line", [("SIGINT", 130, "gpudoctor: interrupted\n"),
                                              ("SIGTERM", 143, "gpudoctor: terminated\n")])
def test_a_signal_ends_the_server_while_its_client_keeps_stdin_open(signum, code, line):
    """SIGTERM printed "terminated" and the server kept running; SIGINT did nothing, until stdin closed."""
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "gpudoctor", "mcp"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=dict(os.environ, **ENV))
    try:
        hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
        proc.stdin.write((json.dumps(hello) + "\n").encode())
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline().replace(b" ", b"")  # serving, stdin open
        proc.send_signal(getattr(signal, signum))
        assert proc.wait(timeout=20) == code
        assert proc.stderr.read().decode() == line
    finally:
        proc.kill()
        proc.wait()
