"""Secrets never leave gpudoctor: one rule (gpudoctor.redact) where text leaves the program, whatever the format,
the command, or the place a value is quoted (finding messages, evidence, parse errors, diffs, stderr)."""

from __future__ import annotations

import base64
import contextlib
import io
import json
import string
import time

import pytest
from conftest import FIXTURES
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from gpudoctor.cli import main
from gpudoctor.ingest.source import HEAD_BYTES, snapshot_from_reports
from gpudoctor.redact import REDACTED, redact_bytes, redact_text, remember, remembering

MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"


@pytest.mark.parametrize("text,hidden", [
    ("https://me:pa/ss@host.example/simple", "pa/ss"),
    ("https://me:p@ss@host.example/simple", "p@ss"),
    ("pip index https://me:p:a@s/s@host.example:8443/x ok", "p:a@s/s"),
    ("git+https://ghp_abcdef123456@github.com/org/repo.git", "ghp_abcdef123456"),
    ("--extra-index-url me:hunter2hunter@pypi.internal/simple", "hunter2hunter"),
    ("cannot parse 'HF_TOKEN=\"hf_abc…'", "hf_abc"),
    ("export WANDB_API_KEY=0123456789abcdef", "0123456789abcdef"),
])
def test_credentials_are_hidden_whatever_the_password_holds(text, hidden):
    out = redact_text(text)
    assert hidden not in out and REDACTED in out


@pytest.mark.parametrize("text", [
    "user@example.com wrote", "git@github.com:org/repo.git", "unknown key: offload_param",
    "NCCL_SOCKET_IFNAME==eth0", "https://download.pytorch.org/whl/cu124",
])
def test_text_without_secrets_is_left_alone(text):
    assert redact_text(text) == text


def test_a_config_key_in_evidence_is_not_a_secret(tmp_path):
    """GD307's evidence names the key ({"key": "offload_optimizer"}): it stays readable in every line of output."""
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},\n'
                      ' "offload_optimizer": {"device": "cpu"}, "wandb": {"api_key": "0123456789abcdef"}}\n')
    out = _run("lint", config, "--format", "plain") + _run("lint", config, "--format", "json")
    assert 'unknown key "offload_optimizer" at the top level' in out and "0123456789abcdef" not in out


def _run(*argv) -> str:
    """Everything one command prints (stdout and stderr), run in-process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        main([str(a) for a in argv])
    return out.getvalue() + err.getvalue()


def _outputs(tmp_path, name: str, secret: str) -> str:
    env = tmp_path / "job.env"
    env.write_text(f"{name}='{secret}'\n{name}='{secret}x'\nNCCL_{name}='{secret}'\n"
                   f"MODEL_URL='https://me:{secret}@hub.example/m'\nNCCL_DEBUG=INFO\n{name}2=\"{secret}\n")
    target = tmp_path / "target.env"
    target.write_text(env.read_text())
    runs = [("check", "--snapshot", MACHINE, "--env-file", env, "--format", fmt)
            for fmt in ("plain", "json", "markdown", "prometheus")]
    runs += [("lint", env, "--format", fmt) for fmt in ("plain", "json", "markdown")]
    runs += [("fix", "--snapshot", MACHINE, "--env-file", env, "--format", fmt) for fmt in ("dotenv", "shell", "k8s")]
    runs += [("fix", "--snapshot", MACHINE, "--write-env", target, "--dry-run"),
             ("snapshot", "--from", FIXTURES / "reports" / "collect_env_mig.txt", "--env-file", env)]
    nodes = []
    for node, value in (("a", secret), ("b", secret + "x")):  # a hand-made snapshot may carry a raw secret
        data = json.loads(MACHINE.read_text())
        data["facts"]["host"]["hostname"] = node
        data["facts"]["env"].update({name: value, "NCCL_SOCKET_IFNAME": f"=eth{node}"})
        nodes.append(tmp_path / f"{node}.json")
        nodes[-1].write_text(json.dumps(data))
    runs += [("fleet", *nodes, "--format", fmt) for fmt in ("plain", "json")]
    pasted = tmp_path / "rank0.log"  # a pasted log: the value as a variable, a header and in a quoted dict
    pasted.write_text(f"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled "
                      f"system error, NCCL version 2.18.1 {name}={json.dumps(secret)} "
                      f"headers={{'Authorization': 'Bearer {secret}'}} X-Api-Key: {secret}\n")
    runs += [("check", "--from", pasted, "--format", fmt) for fmt in ("plain", "json", "markdown")]
    runs += [("snapshot", "--from", pasted)]
    manifest, dockerfile = tmp_path / "pod.yaml", tmp_path / "Dockerfile"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
                        f"    image: x\n    env:\n    - {{name: {name}, value: {json.dumps(secret)}}}\n"
                        "    - {name: NCCL_DEBUG, value: INFO}\n")
    dockerfile.write_text(f"FROM x\nENV {name}={json.dumps(secret)}\nENV NCCL_DEBUG=INFO\n")
    runs += [("lint", manifest, dockerfile, "--format", fmt) for fmt in ("plain", "json")]
    return "\n".join(_run(*argv) for argv in runs)


SECRET_WORDS = ("TOKEN", "KEY", "SECRET", "PASSWORD", "CREDENTIAL", "AUTH")
names = st.builds(lambda a, w, b: f"{a}{w}{b}", st.sampled_from(["", "HF_", "MY_APP_", "X"]),
                  st.sampled_from(SECRET_WORDS), st.sampled_from(["", "_1", "_VALUE", "S"]))
secrets = st.text(alphabet=string.ascii_letters + string.digits + "!#%&()*+,-./:;<=>?@[]^_{|}~\"", min_size=8,
                  max_size=24)


@pytest.mark.slow
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=names, secret=secrets)
@example(name="TOKEN", secret=",0000000")  # a header's value that starts with a separator
@example(name="HF_TOKEN", secret="p@ss/w0rd@x")  # the URL's password holds '@' and '/'
@example(name="DB_PASSWORD", secret='a"b|c<d>e\\')
def test_a_secret_never_appears_in_any_output(tmp_path, name, secret):
    """Random secret-looking names and values in every input kind (env file, snapshot, pasted log, manifest,
    Dockerfile): no output of any command in any format holds the value or its base64."""
    assume(secret.strip() and secret.lower() not in _baseline(tmp_path).lower())
    printed = _outputs(tmp_path, name, secret)
    for form in {secret, json.dumps(secret)[1:-1], secret.replace("|", "\\|"),
                 base64.b64encode(secret.encode()).decode()}:
        assert form not in printed, f"{name}={secret!r} leaked"


_BASELINE: list = []


def _baseline(tmp_path) -> str:
    """What the commands print with a dull secret: a random secret that is ordinary output text (a PCI bus ID's
    zeros) cannot be told from a leak."""
    if not _BASELINE:
        _BASELINE.append(_outputs(tmp_path, "HF_TOKEN", "QQQQQQQQ"))
    return _BASELINE[0]


PASTED = [  # how credentials show up in pasted logs: request headers, curl lines, printed dicts, JSON bodies
    ("headers={'Authorization': 'Bearer hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01}'", "aBcDeFgHiJkLmNoPq"),
    ("Authorization: Bearer hf_ZZZZZZZZZZZZZZZZZZZZZZZZ", "ZZZZZZZZZZZZ"),
    ("authorization: token ghp_abcdefghijabcdefghij123", "abcdefghijabcdefghij"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw"),
    ('curl -H "Authorization: Bearer sk-live-QQQQQQQQQQQQ" https://api.example', "QQQQQQQQQQQQ"),
    ("X-Api-Key: xkeyxkeyxkey123", "xkeyxkeyxkey123"),
    ("X-Api-Key: ,0000000abc", "0000000abc"),
    ('{"api_key": "jsonkey123456", "model": "x"}', "jsonkey123456"),
    ("HTTPError: 401 for https://hub.example (token hf_AAAAAAAAAAAAAAAAAAAAAAAAAA)", "AAAAAAAAAAAAAAAAAAAA"),
]


@pytest.mark.parametrize("line,hidden", PASTED)
def test_pasted_credentials_are_hidden(line, hidden):
    out = redact_text(line)
    assert hidden not in out and REDACTED in out
    assert redact_bytes(line.encode()) == out.encode()


@pytest.mark.parametrize("line", ["KeyError: 'model.layers.0'", "x-request-id: 0123456789", "Tokenizer loaded",
                                  "{'key': 'offload_optimizer'}", "session 3 of 4: ok",
                                  '"tokens_per_s": 1234.5,', "max_new_tokens=512", "TOKENIZERS_PARALLELISM=false"])
def test_prose_and_ordinary_keys_stay_readable(line):
    assert redact_text(line) == line


@pytest.mark.parametrize("fmt", ["plain", "json", "markdown"])
def test_pasted_log_keeps_no_credential_in_any_format_or_snapshot(tmp_path, fmt):
    """Every reader of pasted text gets it redacted: the NCCL error line quoted as evidence carries the headers."""
    log = tmp_path / "rank0.log"
    log.write_text("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system "
                   "error, NCCL version 2.18.1 " + " ".join(line for line, _ in PASTED) + "\n")
    out = _run("check", "--from", log, "--format", fmt) + _run("snapshot", "--from", log)
    assert "NCCL error" in out
    for _, hidden in PASTED:
        assert hidden not in out


def test_a_redacted_json_document_stays_json():
    document = json.dumps({"api_key": 12345678, "nested": {"NCCL_IB_TOKEN": 87654321}, "tokens_per_s": 99.5})
    assert json.loads(redact_text(document)) == {"api_key": REDACTED, "nested": {"NCCL_IB_TOKEN": REDACTED},
                                                 "tokens_per_s": 99.5}


def test_a_list_under_a_secret_looking_name_in_indented_json_stays_json():
    """`"stage3_keys": [` opens a list whose items are the next lines: hiding the bracket broke the document."""
    document = json.dumps({"evidence": {"stage3_keys": ["sub_group_size"], "auth_methods": {"a": 1}}}, indent=2)
    assert json.loads(redact_text(document)) == json.loads(document)


def test_pasted_text_is_redacted_before_a_reader_keeps_it():
    """Nothing a reader keeps (facts, evidence, quoted lines) can hold a credential: the report parsers get the head
    redacted, the log reader redacts each line it decodes and the text above it that it searches (a traceback's
    frames), also far beyond the head."""
    token = "hf_" + "Q" * 22
    text = (f"ok\nAuthorization: Bearer {token}\n" + "step 1 loss 2.0\n" * (HEAD_BYTES // 16) +
            f"RuntimeError: CUDA error: out of memory (Authorization: Bearer {token})\n"
            f'  File "/home/{token}/train.py", line 57, in <module>\n'
            "RuntimeError: An attempt has been made to start a new process before the current process has finished "
            "its bootstrapping phase.\n")
    snapshot = snapshot_from_reports(["-"], stdin=io.BytesIO(text.encode()))
    kept = repr((snapshot.facts, snapshot.evidence, snapshot.source))
    events = {event["kind"]: event for event in snapshot.facts["logs"]["events"]}
    assert events["spawn_bootstrap"]["script"] == f"/home/{REDACTED}/train.py"
    assert f"Bearer {REDACTED}" in events["cuda_oom"]["line"]
    assert "QQQQ" not in kept


def test_a_remembered_secret_is_hidden_in_base64_too():
    with remembering():
        remember("hunter2hunter2")
        assert "aHVudGVyMmh1bnRlcjI=" not in redact_text("basic aHVudGVyMmh1bnRlcjI= here")


def _seconds(text: str) -> float:
    best = float("inf")
    for _ in range(3):
        started = time.process_time()  # CPU time: another process on a loaded machine does not count
        redact_text(text)
        best = min(best, time.process_time() - started)
    return best


@pytest.mark.parametrize("unit", ["a", "ab1", "a://", "https://a:b", "a-", "a:a@", "A='x", "key=val\n", "hf_",
                                  '"a": ', "x@"])
def test_redaction_is_linear(unit):
    """Four times the text takes about four times as long, never sixteen (a 15 MB token once took minutes)."""
    small = unit * (20000 // len(unit))
    assert _seconds(small * 4) < 8 * _seconds(small) + 0.05  # the slack absorbs a loaded machine's pauses


def _env_with_secrets(tmp_path):
    env = tmp_path / "job.env"
    env.write_text('NCCL_IB_TOKEN=tokval12345\nexport NCCL_AUTH_TOKEN ncclTok_abcdef123\n'
                   'NCCL_SESSION="line1secret\nline2secret"\n')
    return env


SECRET_PARTS = ("tokval12345", "ncclTok_abcdef123", "line1secret", "line2secret")


@pytest.mark.parametrize("fmt", ["dotenv", "shell", "slurm", "k8s"])
def test_fix_never_prints_a_secret_under_its_new_name(tmp_path, fmt):
    """GD401 renames NCCL_IB_TOKEN to NCCL_IB_PKEY and NCCL_SESSION (multi-line) to NCCL_VERSION: the value is a
    secret whatever it is called now."""
    out = _run("fix", "--unsafe", "--snapshot", MACHINE, "--env-file", _env_with_secrets(tmp_path), "--format", fmt)
    assert "NCCL_IB_PKEY" in out or fmt == "slurm"
    assert not [part for part in SECRET_PARTS if part in out]


def test_fix_dry_run_diff_and_parse_errors_hide_secrets_but_the_file_keeps_them(tmp_path):
    env = _env_with_secrets(tmp_path)
    report = tmp_path / "report.json"
    out = _run("fix", "--unsafe", "--snapshot", MACHINE, "--write-env", env, "--dry-run")
    out += _run("check", "--snapshot", MACHINE, "--env-file", env, "--format", "json", "--output", report)
    out += report.read_text() + _run("lint", env, "--format", "plain")
    assert "NCCL_AUTH_TOKEN <redacted>'" in out
    assert not [part for part in SECRET_PARTS if part in out]
    _run("fix", "--unsafe", "--snapshot", MACHINE, "--write-env", env)
    assert "NCCL_IB_PKEY=tokval12345" in env.read_text()  # the user's own file keeps the real value


def test_a_policy_never_shows_the_secret_it_compares(tmp_path):
    policy = tmp_path / "site.toml"
    policy.write_text('schema = "gpudoctor.policy/1"\n[[rule]]\nid = "SITE001"\nname = "site-auth"\n'
                      'severity = "error"\nmessage = "not the site token"\n'
                      'require = { fact = "env.NCCL_AUTH_TOKEN", op = "eq", value = "sitePolTok_98765" }\n'
                      '[rule.fix]\nsummary = "Set the site token."\napplicability = "safe"\n'
                      'env = { set = { NCCL_AUTH_TOKEN = "sitePolTok_98765" } }\n')
    out = (_run("explain", "SITE001", "--policy", policy) + _run("rules", "--policy", policy)
           + _run("fix", "--snapshot", MACHINE, "--policy", policy, "--format", "k8s"))
    assert "env.NCCL_AUTH_TOKEN eq <redacted>" in out and "sitePolTok" not in out


def test_a_text_written_again_is_redacted_as_the_secrets_known_now():
    """redact_text answers a text it has met from memory (a fleet's nodes share their verdicts' text), never with
    what it gave before a secret in that text was remembered, nor with one remembered inside `remembering`."""
    text = "the node's setting is s3cr3t-value-0042 (as the job sees it)\n"
    with remembering():
        assert redact_text(text) == text
        assert redact_text(text) == text
        remember("s3cr3t-value-0042")
        assert redact_text(text) == "the node's setting is <redacted> (as the job sees it)\n"
    assert redact_text(text) == text
