"""GD301-GD309: DeepSpeed configs (parsed, never run) and DeepSpeed's build toolchain.

The tests marked `real_deepspeed` ask the installed DeepSpeed itself (in a child process, so importing it cannot
disturb the other tests): which config keys it knows and which sections it validates strictly, whether it accepts
the fixture configs, and that the torch probe reports its version and pre-built ops. They are skipped where
DeepSpeed is not installed.
"""

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from gpudoctor.catalog import find_rule, load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.knowledge import table
from gpudoctor.probes import libaio
from gpudoctor.readers.ds_config import detect as looks_like_ds_config
from gpudoctor.readers.ds_config import parse
from gpudoctor.readers.registry import read_file
from gpudoctor.snapshot import Snapshot, load

CONFIGS = FIXTURES / "ds_configs"
SEED_CONFIG = CONFIGS / "zero2_offload.json"
SEED_MACHINE = FIXTURES / "machines" / "rtx6000ada-nvcc115-cu124.json"
CLEAN = ["zero3_offload.json", "zero2.json", "zero3_nvme.json"]
HAVE_DEEPSPEED = importlib.util.find_spec("deepspeed") is not None
real_deepspeed = pytest.mark.skipif(not HAVE_DEEPSPEED, reason="deepspeed is not installed")
DS_RULES = [rule for rule in load_catalog() if rule.id.startswith("GD3")]


def findings(facts, rules=DS_RULES):
    report = evaluate(Snapshot(facts=facts), rules)
    return report


def config_facts(text, path="ds.json", **extra):
    snapshot = Snapshot(facts=dict(extra))
    read_file(Path(path), snapshot, part="ds_config", text=text, as_format="ds_config")  # as check --ds-config
    return snapshot.facts


def fired(report):
    return sorted(f"{f.rule}:{f.severity}" for f in report.findings)


# --- seed 004 -----------------------------------------------------------------------------------------------

def test_seed_config_lint_gives_gd304_at_offload_param_gd309_and_gd311(run_cli):
    code, out, err = run_cli("lint", SEED_CONFIG, "--format", "json")
    data = json.loads(out)
    got = sorted(f"{f['rule']}:{f['severity']}" for f in data["findings"])
    assert got == ["GD304:warning", "GD309:info", "GD311:info"], data["findings"]
    gd311 = next(f for f in data["findings"] if f["rule"] == "GD311")
    line = next(i for i, text in enumerate(SEED_CONFIG.read_text().splitlines(), 1) if '"sub_group_size"' in text)
    assert gd311["location"]["line"] == line and '"sub_group_size"' in gd311["message"]
    gd304 = next(f for f in data["findings"] if f["rule"] == "GD304")
    line = next(i for i, text in enumerate(SEED_CONFIG.read_text().splitlines(), 1) if '"offload_param"' in text)
    assert gd304["location"] == {"path": str(SEED_CONFIG), "line": line, "column": None}
    assert "stage 2" in gd304["message"]
    gd309 = next(f for f in data["findings"] if f["rule"] == "GD309")
    assert "train_batch_size" in gd309["message"] and "6 place" in gd309["message"]
    assert code == 0 and err == ""


def test_seed_machine_with_its_config_matches_the_ux_sketch(run_cli):
    code, out, err = run_cli("check", "--snapshot", SEED_MACHINE, "--ds-config", SEED_CONFIG, "--format", "json")
    data = json.loads(out)
    got = sorted(f"{f['rule']}:{f['severity']}" for f in data["findings"])
    assert got == ["GD102:error", "GD303:warning", "GD304:warning", "GD309:info", "GD311:info"]
    gd303 = next(f for f in data["findings"] if f["rule"] == "GD303")
    assert "nvcc 11.5" in gd303["message"] and "12.4" in gd303["message"] and "DS_BUILD_OPS=0" in gd303["message"]
    assert gd303["fix"]["env"]["unset"] == ["DS_SKIP_CUDA_CHECK"] and gd303["fix"]["applicability"] == "unsafe"
    assert code == 1 and err == ""


def test_seed_machine_alone_has_gd303():
    report = evaluate(load(str(SEED_MACHINE)), load_catalog())
    assert fired(report) == ["GD102:error", "GD303:warning"]


# --- clean configs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CLEAN)
def test_clean_configs_have_no_findings(name):
    facts = config_facts((CONFIGS / name).read_text(), name, env={"WORLD_SIZE": "8"},
                         torch={"status": "ok", "deepspeed": {"version": "0.19.8"}})
    report = findings(facts, [r for r in DS_RULES if not r.host])
    assert report.findings == (), [f.message for f in report.findings]
    assert not report.unknown


def test_hf_auto_config_is_info_only(run_cli):
    code, out, _ = run_cli("lint", CONFIGS / "hf_zero3_auto.json", "--format", "json")
    data = json.loads(out)
    assert [f["rule"] for f in data["findings"]] == ["GD309"] and code == 0
    assert "16 place" in data["findings"][0]["message"]


def test_bf16_enabled_is_a_precision_request_for_gd201(run_cli):
    t4 = FIXTURES / "machines" / "t4-cu121.json"
    code, out, _ = run_cli("check", "--snapshot", t4, "--ds-config", CONFIGS / "zero3_offload.json",
                           "--format", "json", "--select", "GD201")
    data = json.loads(out)
    assert [(f["rule"], f["severity"]) for f in data["findings"]] == [("GD201", "error")]
    assert "zero3_offload.json:7" in data["findings"][0]["message"]
    facts = config_facts('{"fp16": {"enabled": true}, "bf16": {"enabled": "auto"}}')
    assert [r["line"] for r in facts["requests"]["fp16"]] == [1] and "bf16" not in facts["requests"]


# --- parsing: positions and bad input ---------------------------------------------------------------------------

def test_key_lines_follow_nesting_arrays_and_escapes():
    text = textwrap.dedent("""\
        {
          "a\\"b": {"c": "}{][,"},
          "zero_optimization": {
            "stage": 3,
            "offload_param": {
              "device": "cpu"
            }
          },
          "list": [{"x": 1},
                   {"y": [2, {"z": 3}]}]
        }""")
    parsed = parse(text)
    assert parsed.error is None
    assert parsed.lines == {'a"b': 2, 'a"b.c': 2, "zero_optimization": 3, "zero_optimization.stage": 4,
                            "zero_optimization.offload_param": 5, "zero_optimization.offload_param.device": 6,
                            "list": 9, "list.0.x": 9, "list.1.y": 10, "list.1.y.1.z": 10}


BAD = {
    "invalid": ('{\n  "fp16": {"enabled": true}\n  "bf16": {}\n}', "error", "Expecting ',' delimiter", 3),
    "comment": ('{\n  // ZeRO-2\n  "train_micro_batch_size_per_gpu": 1\n}', "warning", "comment", 2),
    "hash comment": ('{\n  "train_micro_batch_size_per_gpu": 1  # one\n}', "warning", "comment", 2),
    "trailing comma": ('{\n  "train_micro_batch_size_per_gpu": 1,\n}', "warning", "trailing comma", 2),
    "bom": ("\ufeff{\"train_micro_batch_size_per_gpu\": 1}", "warning", "byte-order mark", 1),
    "huge number": ('{"train_micro_batch_size_per_gpu": ' + "7" * 5000 + "}", "error", "5000-digit", 1),
    "deeply nested": ('{"a": ' * 5000 + "1" + "}" * 5000, "error", "levels deep", None),
    "top-level array": ('[{"train_batch_size": 8}]', "error", "top level is an array", 1),
    "top-level string": ('"zero_optimization"', "error", "top level is a string", 1),
    "empty": ("\n\n", "error", "empty", 1),
    "duplicate key": ('{"train_micro_batch_size_per_gpu": 1,\n "train_micro_batch_size_per_gpu": 2}', "error",
                      "given twice", 2),
    "binary": ("\x00\x01\x02PK\x03\x04", "error", "Expecting value", 1),
    "unterminated": ('{"zero_optimization": {"stage": 2', "error", "Expecting", 1),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_is_one_gd307_finding_never_a_traceback(name, tmp_path, run_cli):
    text, severity, words, line = BAD[name]
    path = tmp_path / "ds.json"
    path.write_text(text, encoding="utf-8")
    machine = FIXTURES / "machines" / "laptop-no-nvidia.json"
    code, out, err = run_cli("check", "--snapshot", machine, "--ds-config", path, "--format", "json",
                             "--select", "GD0,GD3")
    assert err == ""
    data = json.loads(out)
    gd307 = [f for f in data["findings"] if f["rule"] == "GD307"]
    assert len(gd307) == 1, data["findings"]
    assert gd307[0]["severity"] == severity and words in gd307[0]["message"]
    assert gd307[0]["location"]["line"] == line
    assert not [f for f in data["findings"] if f["rule"] in ("GD001", "GD003")]
    assert code == (1 if severity == "error" else 0)


def test_a_missing_ds_config_is_a_usage_error(run_cli, tmp_path):
    code, out, err = run_cli("check", "--snapshot", SEED_MACHINE, "--ds-config", tmp_path / "nope.json")
    assert code == 2 and out == "" and err.count("\n") == 1 and "no such file" in err


def test_several_configs_in_one_lint(run_cli):
    code, out, _ = run_cli("lint", SEED_CONFIG, CONFIGS / "zero2.json", CONFIGS / "hf_zero3_auto.json",
                           "--format", "json")
    data = json.loads(out)
    paths = sorted({f["location"]["path"] for f in data["findings"]})
    assert paths == [str(CONFIGS / "hf_zero3_auto.json"), str(SEED_CONFIG)]


def test_which_files_are_deepspeed_configs(tmp_path):
    ds = '{"zero_optimization": {"stage": 2}}'
    assert looks_like_ds_config(Path("ds.json"), ds)
    assert looks_like_ds_config(Path("ds.json"), "// hjson\n" + ds)
    assert looks_like_ds_config(Path("ds_config"), ds)
    assert looks_like_ds_config(Path("ds.json"), '{"fp16": {"enabled": true}, "optimizer": {"type": "Adam"}}')
    assert not looks_like_ds_config(Path("train.py"), '# train\nds = {"train_batch_size": 8}')
    assert not looks_like_ds_config(Path("config.json"), '{"architectures": ["LlamaForCausalLM"], "bf16": true}')
    assert not looks_like_ds_config(Path("package.json"), '{"name": "x", "scripts": {"optimizer": "y"}}')
    assert not looks_like_ds_config(Path("job.yaml"), 'train_batch_size: 8\n"train_batch_size": 8')


def test_secret_values_are_not_kept():
    facts = config_facts('{"comet": {"enabled": true, "api_key": "abc123"}}')
    assert facts["ds_config"]["config"]["comet"] == {"enabled": True, "api_key": "<redacted>"}


# --- GD304-GD307, GD309 details -----------------------------------------------------------------------------

def rule_findings(rule_id, facts):
    report = evaluate(Snapshot(facts=facts), [find_rule(rule_id)])
    return report


def test_gd304_deprecated_cpu_offload_param_and_nvme():
    report = rule_findings("GD304", config_facts('{"zero_optimization": {"stage": 1, "cpu_offload_param": true}}'))
    assert [f.severity.name for f in report.findings] == ["WARNING"]
    assert "cpu_offload_param" in report.findings[0].message
    report = rule_findings("GD304", config_facts('{"zero_optimization": {"stage": 3, "offload_param": '
                                                 '{"device": "nvme"}}}'))
    assert not report.findings
    report = rule_findings("GD304", config_facts('{"zero_optimization": {"stage": 2, "offload_param": '
                                                 '{"device": "none"}}}'))
    assert not report.findings


def test_gd311_names_field_names_and_stage3_aliases_and_leaves_offload_param_to_gd304():
    config = ('{"zero_optimization": {"stage": 1, "prefetch_bucket_size": 1,\n'
              '"stage3_max_reuse_distance": 1, "offload_param": {"device": "cpu"}}}')
    report = rule_findings("GD311", config_facts(config))
    assert [f.severity.name for f in report.findings] == ["INFO"]
    assert report.findings[0].evidence["stage3_keys"] == ["prefetch_bucket_size", "stage3_max_reuse_distance"]
    assert report.findings[0].location.line == 1 and "stage 1" in report.findings[0].message
    for config in ('{"zero_optimization": {"stage": "auto", "sub_group_size": 1}}',  # GD309's
                   '{"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}'):  # GD304's
        assert not rule_findings("GD311", config_facts(config)).findings


@pytest.mark.slow
@real_deepspeed
def test_the_stage3_only_keys_are_those_the_installed_deepspeed_reads_only_at_stage_3():
    """rules/deepspeed_config.toml `stage3_only` is what tools/gen_deepspeed_config.py derives from the installed
    DeepSpeed's code; a DeepSpeed that reads one of them at stage 1/2 too, or a new stage-3 key, fails here."""
    code = "import json, sys; sys.path.insert(0, 'tools'); import gen_deepspeed_config as g; " \
           "print(json.dumps(g.stage3_only()))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                            cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    derived = json.loads(result.stdout.strip().splitlines()[-1])
    assert {"sub_group_size", "stage3_max_live_parameters"} <= set(derived) and "reduce_bucket_size" not in derived
    assert derived == table("deepspeed_config")["stage3_only"]["keys"]


def test_gd305_reads_the_old_bfloat16_spelling():
    report = rule_findings("GD305", config_facts('{"fp16": {"enabled": true},\n"bfloat16": {"enabled": true}}'))
    assert report.findings[0].location.line == 2 and '"bfloat16"' in report.findings[0].message


@pytest.mark.parametrize("config,env,gpus,expected", [
    ({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, "4", 0, []),
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, "4", 0,
     ["error"]),
    # consistent only with a data-parallel size of 2 out of 4 ranks (tensor parallel 2): a warning
    ({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, "4", 0,
     ["warning"]),
    # only train and micro: DeepSpeed derives accumulation = 36 // 4 // 4 = 2 and 4*2*4 = 32 != 36
    ({"train_batch_size": 36, "train_micro_batch_size_per_gpu": 4}, "4", 0, ["error"]),
    ({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4}, "4", 0, []),
    ({"train_batch_size": 10}, "4", 0, ["error"]),
    # world size from the GPU count: 8 GPUs, 64 = 4*2*8; 128 = two such nodes; 24 fits no node count: warning
    ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, None, 8, []),
    ({"train_batch_size": 128, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, None, 8, []),
    ({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}, None, 8,
     ["warning"]),
    ({"train_batch_size": "32", "train_micro_batch_size_per_gpu": 4}, "4", 0, ["error"]),
    ({"train_batch_size": 0, "train_micro_batch_size_per_gpu": 4}, "4", 0, ["error"]),
    ({"train_batch_size": 32.5, "train_micro_batch_size_per_gpu": 4}, "4", 0, ["error"]),
    ({"train_batch_size": 1e30, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1}, "4", 0,
     ["error"]),
    ({"train_batch_size": 4 * 10**40, "train_micro_batch_size_per_gpu": 10**40, "gradient_accumulation_steps": 1},
     "4", 0, []),
    ({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 4}, "4", 0, []),
])
def test_gd306_world_sizes(config, env, gpus, expected):
    facts = config_facts(json.dumps(config), env={"WORLD_SIZE": env} if env else {},
                         nvml={"gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * gpus} if gpus else {})
    report = rule_findings("GD306", facts)
    assert [str(f.severity) for f in report.findings] == expected, [f.message for f in report.findings]


def test_gd306_takes_world_size_from_a_job_file_given_to_lint(run_cli, tmp_path):
    (tmp_path / "job.env").write_text("WORLD_SIZE=4\n")
    (tmp_path / "ds.json").write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,\n'
                                      ' "gradient_accumulation_steps": 2}')
    code, out, _ = run_cli("lint", tmp_path / "job.env", tmp_path / "ds.json", "--format", "json", "--select", "GD3")
    data = json.loads(out)
    assert [(f["rule"], f["severity"], f["location"]["line"]) for f in data["findings"]] == [("GD306", "error", 1)]
    assert "= 32" in data["findings"][0]["message"] and code == 1


def test_gd306_is_unknown_without_a_world_size():
    facts = config_facts('{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4}', env={})
    report = rule_findings("GD306", facts)
    assert not report.findings and [u.missing for u in report.unknown] == ["env.WORLD_SIZE"]


def test_gd307_unknown_keys_strict_loose_removed_renamed():
    text = ('{"train_micro_batch_size_per_gpu": 1,\n"gradient_acumulation_steps": 4,\n'
            '"zero_optimization": {"stage": 3, "stage3_prefetch_bucket_sise": 1},\n'
            '"aio": {"thread_count": 2},\n"amp": {"enabled": false},\n"_comment": "fine"}')
    lint = rule_findings("GD307", config_facts(text))
    got = {(f.evidence.get("key"), str(f.severity)) for f in lint.findings}
    assert got == {("gradient_acumulation_steps", "warning"),
                   ("zero_optimization.stage3_prefetch_bucket_sise", "error"),
                   ("aio.thread_count", "info"), ("amp", "info")}
    by_key = {f.evidence["key"]: f for f in lint.findings}
    assert by_key["gradient_acumulation_steps"].evidence["suggestion"] == "gradient_accumulation_steps"
    assert by_key["gradient_acumulation_steps"].location.line == 2
    assert by_key["zero_optimization.stage3_prefetch_bucket_sise"].evidence["suggestion"] == \
        "stage3_prefetch_bucket_size"
    new = rule_findings("GD307", config_facts(text, torch={"deepspeed": {"version": "0.19.8"}}))
    assert {(f.evidence.get("key"), str(f.severity)) for f in new.findings} >= {("aio.thread_count", "warning"),
                                                                                 ("amp", "error")}
    old = rule_findings("GD307", config_facts(text, torch={"deepspeed": {"version": "0.15.1"}}))
    assert {f.evidence.get("key") for f in old.findings} == {"gradient_acumulation_steps",
                                                            "zero_optimization.stage3_prefetch_bucket_sise"}


def test_gd307_points_misplaced_keys_to_their_section():
    report = rule_findings("GD307", config_facts('{"stage": 2, "offload_optimizer": {"device": "cpu"}}'))
    assert {f.evidence["key"] for f in report.findings} == {"stage", "offload_optimizer"}
    assert all('belongs inside "zero_optimization"' in f.message for f in report.findings)


def test_gd307_sends_top_level_keys_found_in_a_section_back_to_the_top_level():
    text = ('{"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "AdamW", "scheduler": {"type": "WarmupLR"}},'
            ' "zero_optimization": {"stage": 3, "aio": {"block_size": 1048576}}}')
    report = rule_findings("GD307", config_facts(text))
    assert {f.evidence["key"]: str(f.severity) for f in report.findings} == {
        "optimizer.scheduler": "warning", "zero_optimization.aio": "error"}
    for finding in report.findings:
        assert "belongs at the top level" in finding.message and '""' not in finding.message
        assert finding.fix.summary.startswith("Move it out to the top level")


def test_gd307_names_a_home_only_above_or_below_the_section():
    text = ('{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": true, "type": "bfloat16"},'
            ' "zero_optimization": {"stage": 3, "device": "cpu"}}')
    found = {f.evidence["key"]: f for f in rule_findings("GD307", config_facts(text)).findings}
    assert "belongs" not in found["fp16.type"].message and "optimizer" not in found["fp16.type"].message
    assert found["fp16.type"].fix.summary.startswith('Remove "type"')
    both = '"zero_optimization.offload_param" or "zero_optimization.offload_optimizer"'
    assert f"belongs inside {both}" in found["zero_optimization.device"].message
    assert found["zero_optimization.device"].fix.summary.startswith(f"Move it into {both}")


def test_gd307_a_section_that_is_not_an_object():
    text = '{"fp16": true, "zero_optimization": {"stage": 3, "offload_optimizer": true, "offload_param": "cpu"}}'
    report = rule_findings("GD307", config_facts(text))
    assert {f.evidence["key"]: str(f.severity) for f in report.findings} == {
        "fp16": "error", "zero_optimization.offload_optimizer": "error", "zero_optimization.offload_param": "error"}
    assert 'Write "offload_param" as an object' in next(
        f.fix.summary for f in report.findings if f.evidence["key"].endswith("offload_param"))
    defaults = '{"zero_optimization": {"stage": 2, "offload_optimizer": null}, "bf16": {"enabled": true}}'
    assert not rule_findings("GD307", config_facts(defaults)).findings
    assert not rule_findings("GD307", config_facts('{"zero_optimization": true}')).findings


SECTION_ACCEPTED = [
    {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2, "offload_optimizer": None}},
    {"train_micro_batch_size_per_gpu": 1, "zero_optimization": True},
    {"train_micro_batch_size_per_gpu": 1, "optimizer": {"type": "Adam", "scheduler": {"type": "x"}}}]


def _section_scalars():
    paths = [s["path"] for s in table("deepspeed_config")["section"] if s["path"]]
    return [{"train_micro_batch_size_per_gpu": 1, **_nest(path, value)} for path in paths for value in (True, "x")]


@pytest.mark.slow
@real_deepspeed
def test_real_deepspeed_refuses_a_section_that_is_not_an_object(deepspeed_answer):
    scalars, accepted = _section_scalars(), SECTION_ACCEPTED
    results = deepspeed_answer["asked"]["sections"]["configs"]
    refused = {json.dumps(config): result for config, result in zip(scalars, results) if result != "ok"}
    accepted_by_deepspeed = {json.dumps(c) for c, r in zip(scalars, results) if r == "ok"}
    assert accepted_by_deepspeed == {json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": True})}
    assert results[len(scalars):] == ["ok"] * len(accepted)
    for text in refused:
        assert [f.evidence["key"] for f in rule_findings("GD307", config_facts(text)).findings] != [], text
    for config in accepted[:2] + [{"train_micro_batch_size_per_gpu": 1, "zero_optimization": True}]:
        assert not rule_findings("GD307", config_facts(json.dumps(config))).findings


def test_gd307_caps_the_number_of_unknown_keys():
    config = {f"nonsense_{i}": i for i in range(100)}
    report = rule_findings("GD307", config_facts(json.dumps(config)))
    assert len(report.findings) == 20


# --- GD301-GD303, GD308 details -----------------------------------------------------------------------------

TORCH_124 = {"status": "ok", "version": "2.5.1+cu124", "cuda": "12.4", "deepspeed": {"version": "0.15.1"}}


def test_ds_toolkit_follows_cuda_home_not_path():
    facts = {"env": {"DS_BUILD_OPS": "1", "DS_SKIP_CUDA_CHECK": "1"}, "torch": TORCH_124,
             "nvcc": {"path": "/usr/bin/nvcc", "version": "11.5", "cuda_home": "/usr/local/cuda-12.4",
                      "toolkits": [{"path": "/usr/local/cuda-12.4", "version": "12.4"}]}}
    report = findings(facts, [find_rule("GD301"), find_rule("GD303")])
    assert report.findings == ()  # DeepSpeed builds with $CUDA_HOME/bin/nvcc, which is 12.4
    facts["nvcc"]["cuda_home"] = "/opt/cuda-gone"
    report = findings(facts, [find_rule("GD301")])
    assert "does not exist" in report.findings[0].message


def test_gd301_fix_sets_ds_build_ops_0_and_unsets_per_op_vars():
    facts = {"env": {"DS_BUILD_FUSED_ADAM": "1"}, "torch": TORCH_124,
             "nvcc": {"path": "/usr/bin/nvcc", "version": "11.5", "toolkits": []}}
    fix = findings(facts, [find_rule("GD301")]).findings[0].fix
    assert dict(fix.env.set) == {"DS_BUILD_OPS": "0"} and fix.env.unset == ("DS_BUILD_FUSED_ADAM",)
    facts["torch"] = {"status": "missing"}
    assert "not installed" in findings(facts, [find_rule("GD301")]).findings[0].message
    facts["torch"] = {"status": "ok", "version": "2.5.1+cpu", "cuda": None}
    assert findings(facts, [find_rule("GD301")]).findings == ()


def test_gd302_uses_the_config_and_the_prebuilt_ops():
    facts = config_facts('{"optimizer": {"type": "Lamb"}, "zero_optimization": {"stage": 1}}',
                         torch={"status": "ok", "ninja": None,
                                "deepspeed": {"version": "0.15.1", "installed_ops": {"fused_lamb": False,
                                                                                     "cpu_adam": True}}})
    report = rule_findings("GD302", facts)
    assert "fused_lamb" in report.findings[0].message
    facts["torch"]["deepspeed"]["installed_ops"]["fused_lamb"] = True
    assert not rule_findings("GD302", facts).findings
    torch_adam = config_facts('{"optimizer": {"type": "AdamW", "params": {"torch_adam": true}}}',
                              torch={"status": "ok", "ninja": None, "deepspeed": {"version": "0.15.1",
                                                                                  "installed_ops": {"x": True}}})
    assert not rule_findings("GD302", torch_adam).findings


def test_gd308_prebuilt_async_io_needs_only_the_runtime_library():
    text = (CONFIGS / "zero3_nvme.json").read_text()
    torch = {"status": "ok", "deepspeed": {"version": "0.15.1", "installed_ops": {"async_io": True}}}
    facts = config_facts(text, "zero3_nvme.json", torch=torch,
                         host={"libaio": {"library": "/usr/lib64/libaio.so.1", "dev_library": None, "header": None}})
    assert not rule_findings("GD308", facts).findings
    facts["host"]["libaio"]["library"] = None
    report = rule_findings("GD308", facts)
    assert len(report.findings) == 1 and "libaio.so.1" in report.findings[0].message
    assert report.findings[0].location.line == 8  # offload_optimizer.device, the first NVMe one
    facts.pop("host")
    assert [u.missing for u in rule_findings("GD308", facts).unknown] == ["host.libaio"]


def test_libaio_finder_reads_the_search_paths(tmp_path):
    lib, inc = tmp_path / "lib", tmp_path / "include"
    lib.mkdir()
    inc.mkdir()
    environ = {"LIBRARY_PATH": str(lib), "CPATH": str(inc)}
    (lib / "libaio.so.1").write_bytes(b"")
    found = libaio.find(environ)
    assert found["library"] == str(lib / "libaio.so.1")  # the variables' directories come first
    (lib / "libaio.so").symlink_to(lib / "libaio.so.1")
    (inc / "libaio.h").write_text("")
    found = libaio.find({"LDFLAGS": f"-L{lib} -Wl,-O1", "CFLAGS": f"-O2 -I {inc}"})
    assert found == {"library": str(lib / "libaio.so.1"), "dev_library": str(lib / "libaio.so"),
                     "header": str(inc / "libaio.h")}


def test_the_live_system_probe_reports_libaio():
    from gpudoctor.probes import ProbeContext
    from gpudoctor.probes.system import probe_system

    found = probe_system(ProbeContext())["host"]["libaio"]
    assert set(found) == {"library", "dev_library", "header"}


# --- the torch probe reads DeepSpeed's pre-built ops without importing it --------------------------------------

def test_torch_child_reads_installed_ops_without_importing_deepspeed(tmp_path):
    package = tmp_path / "deepspeed"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('deepspeed was imported')\n")
    (package / "git_version_info_installed.py").write_text(
        "version='0.15.1'\ngit_hash='abc'\ngit_branch='HEAD'\n"
        "installed_ops={'async_io': 1, 'cpu_adam': 1, 'fused_adam': False}\naccelerator_name='cuda'\n"
        "torch_info={'version': '2.4', 'bf16_support': True, 'cuda_version': '12.4', 'nccl_version': '2.20', "
        "'hip_version': '0.0'}\n")
    info = tmp_path / "deepspeed-0.15.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: deepspeed\nVersion: 0.15.1\n")
    child = ROOT / "gpudoctor" / "probes" / "torch_child.py"
    result = subprocess.run([sys.executable, "-S", str(child)], capture_output=True, text=True, timeout=120,
                            env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    facts = json.loads(result.stdout.strip().splitlines()[-1])
    assert facts["deepspeed"] == {"version": "0.15.1", "installed_ops": {"async_io": True, "cpu_adam": True,
                                                                         "fused_adam": False},
                                  "wheel_torch": "2.4", "wheel_cuda": "12.4", "accelerator": "cuda"}


# --- the real DeepSpeed ---------------------------------------------------------------------------------------

ASK_DEEPSPEED = r'''
import contextlib, io, json, sys, warnings
warnings.filterwarnings("ignore")
out = {}
with contextlib.redirect_stdout(io.StringIO()):
    import importlib
    import deepspeed
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime import config as ds_config
    from deepspeed.git_version_info import installed_ops, torch_info
    jobs = json.load(sys.stdin)
    out["version"] = deepspeed.__version__
    out["installed_ops"] = {k: bool(v) for k, v in installed_ops.items()}
    out["removed"] = sorted(list(ds_config._REMOVED_TOP_LEVEL_CONFIG_KEYS) +
                            ["zero_optimization." + k for k in ds_config._REMOVED_ZERO_CONFIG_KEYS])
    fields = {}
    for path, target in jobs["models"].items():
        module, _, name = target.partition(":")
        model = getattr(importlib.import_module(module), name)
        fields[path] = sorted({n for n in model.model_fields} |
                              {f.alias for f in model.model_fields.values() if f.alias})
    out["fields"] = fields
    results = []
    for config in jobs["configs"]:
        try:
            DeepSpeedConfig(config)
            results.append("ok")
        except BaseException as exc:
            results.append(type(exc).__name__ + ": " + str(exc)[:200])
    out["configs"] = results
    try:
        from deepspeed.ops.op_builder import AsyncIOBuilder
        out["aio_compatible"] = bool(AsyncIOBuilder().is_compatible())
    except Exception as exc:
        out["aio_compatible"] = type(exc).__name__
    paths = []
    for path in jobs["paths"]:
        try:
            DeepSpeedConfig(path)
            paths.append("ok")
        except BaseException as exc:
            paths.append(type(exc).__name__ + ": " + str(exc)[:200])
    out["paths"] = paths
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def deepspeed_answer(tmp_path_factory):
    """The installed DeepSpeed's own answers (version, ops, model fields, removed keys, async_io) and its verdict
    on every config and file the tests below ask about, in one child process; `asked[test]`: that test's part."""
    groups, paths = _rule_configs(tmp_path_factory.mktemp("deepspeed"))
    asked = {"sections": {"configs": _section_scalars() + SECTION_ACCEPTED, "paths": []},
             "rules": {"configs": [c for group in groups for c in group], "paths": paths, "groups": groups},
             "values": {"configs": _validated_values(), "paths": []}}
    answer = ask_deepspeed([c for part in asked.values() for c in part["configs"]],
                           [p for part in asked.values() for p in part["paths"]])
    configs, paths_read = iter(answer["configs"]), iter(answer["paths"])
    for part in asked.values():
        part["path_names"] = part["paths"]
        part["configs"] = [next(configs) for _ in part["configs"]]
        part["paths"] = [next(paths_read) for _ in part["paths"]]
    return dict(answer, asked=asked)


def ask_deepspeed(configs=(), paths=()):
    models = {s["path"]: s["model"] for s in table("deepspeed_config")["section"] if s["strict"]}
    jobs = {"models": models, "configs": list(configs), "paths": [str(p) for p in paths]}
    result = subprocess.run([sys.executable, "-c", ASK_DEEPSPEED], input=json.dumps(jobs), capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def concrete(config):
    """The config with every "auto" replaced the way the HF Trainer would (1 GPU)."""
    values = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4,
              "betas": [0.9, 0.999], "enabled": False, "gradient_clipping": 1.0}
    if isinstance(config, dict):
        return {k: (values.get(k, 1000000 if k.endswith(("size", "threshold", "steps")) else 1e-4) if v == "auto"
                    else concrete(v)) for k, v in config.items()}
    return config


@real_deepspeed
def _rule_configs(folder):
    """(fixtures, strict sections with a typo, loose ones with a typo, conflicts), and two files DeepSpeed reads."""
    sections = {s["path"]: s for s in table("deepspeed_config")["section"]}
    fixtures = [concrete(json.loads((CONFIGS / name).read_text())) for name in CLEAN + ["hf_zero3_auto.json"]]
    for config in fixtures:  # DeepSpeedConfig runs without torch.distributed here: world size 1 (GD306 is apart)
        config.pop("train_batch_size", None)
    typo_strict = [{"train_micro_batch_size_per_gpu": 1, **_nest(path, {"gpudoctor_not_a_key": 1})}
                   for path, s in sections.items() if s["strict"]]
    typo_loose = [{"train_micro_batch_size_per_gpu": 1, **_nest(path, {"gpudoctor_not_a_key": 1})}
                  for path, s in sections.items() if not s["strict"]]
    conflicts = [{"train_micro_batch_size_per_gpu": 1, "fp16": {"enabled": True}, "bf16": {"enabled": True}},
                 {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2},
                 {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 1}]
    hjson_file = folder / "commented.json"
    hjson_file.write_text('{\n  // ZeRO-2\n  "train_micro_batch_size_per_gpu": 1,\n  "zero_optimization": '
                          '{"stage": 2,},\n}\n')
    duplicate_file = folder / "duplicate.json"
    duplicate_file.write_text('{"train_micro_batch_size_per_gpu": 1, "train_micro_batch_size_per_gpu": 2}')
    return (fixtures, typo_strict, typo_loose, conflicts), [hjson_file, duplicate_file]


@real_deepspeed
def test_real_deepspeed_agrees_with_the_config_rules(deepspeed_answer):
    answer = deepspeed_answer["asked"]["rules"]
    fixtures, typo_strict, typo_loose, conflicts = answer["groups"]
    hjson_file, duplicate_file = answer["path_names"]
    results = answer["configs"]
    n_fix, n_strict = len(fixtures), len(typo_strict)
    # every clean fixture (autos filled in) is a config DeepSpeed accepts
    assert results[:n_fix] == ["ok"] * n_fix, results[:n_fix]
    # the table's strictness is DeepSpeed's: strict sections reject an unknown key, loose ones ignore it
    assert all("Extra inputs are not permitted" in r for r in results[n_fix:n_fix + n_strict]), \
        results[n_fix:n_fix + n_strict]
    assert results[n_fix + n_strict:n_fix + n_strict + len(typo_loose)] == ["ok"] * len(typo_loose)
    # GD305, GD306 (world size 1 without torch.distributed) and GD309's TypeError are DeepSpeed's own errors
    both, batch, auto = results[-3:]
    assert "cannot be simultaneously enabled" in both and "train_batch_size is not equal" in batch
    assert auto.startswith("TypeError")
    for config, rule_id, severity in ((conflicts[0], "GD305", "error"), (conflicts[1], "GD306", "error")):
        report = rule_findings(rule_id, config_facts(json.dumps(config), env={"WORLD_SIZE": "1"}))
        assert [str(f.severity) for f in report.findings] == [severity]
    # DeepSpeed reads a path with hjson (comments, trailing commas) and refuses duplicate keys
    assert answer["paths"][0] == "ok"
    assert "Duplicate" in answer["paths"][1] or "duplicate" in answer["paths"][1]
    assert parse(hjson_file.read_text()).hjson_only["what"] == "comment"
    assert parse(duplicate_file.read_text()).duplicates[0]["key"] == "train_micro_batch_size_per_gpu"


def _nest(path, leaf):
    node = leaf
    for part in reversed(path.split(".")) if path else ():
        node = {part: node}
    return node


@real_deepspeed
def test_the_key_table_covers_the_installed_deepspeed(deepspeed_answer):
    answer = deepspeed_answer
    data = table("deepspeed_config")
    sections = {s["path"]: set(s["keys"]) for s in data["section"]}
    removed = {r["key"]: r["since"] for r in data["removed"]}
    for path, fields in answer["fields"].items():
        missing = set(fields) - sections[path] - {k.split(".")[-1] for k in removed if k.startswith(path + ".")}
        assert not missing, f"{path}: regenerate rules/deepspeed_config.toml (tools/gen_deepspeed_config.py): {missing}"
    from packaging.version import Version

    for key in answer["removed"]:
        assert key in removed and Version(removed[key]) <= Version(answer["version"].split("+")[0])


@pytest.mark.slow
@real_deepspeed
def test_torch_probe_reports_the_real_deepspeed_install(deepspeed_answer, probes_once):
    from gpudoctor.probes import ProbeContext, all_probes

    facts = all_probes()["torch"].run(ProbeContext(timeout=120))["torch"]
    answer = deepspeed_answer
    assert facts["deepspeed"]["version"] == answer["version"]
    assert facts["deepspeed"]["installed_ops"] == answer["installed_ops"]


@real_deepspeed
def test_libaio_fact_agrees_with_deepspeeds_async_io_check(deepspeed_answer):
    """DeepSpeed's AsyncIOBuilder compiles and links a test program with -laio; GD308 relies on the libaio fact
    (dev library and header found) saying the same. (Checked by hand in both directions: with libaio-dev unpacked
    from its .deb and CFLAGS/LDFLAGS pointing at it, both say yes.)"""
    import os
    import shutil

    found = libaio.find(os.environ)
    answer = deepspeed_answer
    if not isinstance(answer["aio_compatible"], bool):
        pytest.skip(f"AsyncIOBuilder unavailable: {answer['aio_compatible']}")
    have_dev = bool(found["dev_library"] and found["header"])
    if have_dev and not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler: DeepSpeed's check cannot compile its test program")
    assert answer["aio_compatible"] == have_dev, found


# --- properties -------------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

KEYS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=8).filter(
    lambda k: not any(word in k.lower() for word in ("key", "token", "secret", "passw", "credential")))
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=10)
OBJECTS = st.dictionaries(KEYS, st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) |
                                             st.dictionaries(KEYS, inner, max_size=3), max_leaves=12), max_size=5)


def _paths(node, prefix=""):
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else key
            yield path
            yield from _paths(value, path)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _paths(value, f"{prefix}.{index}" if prefix else str(index))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(OBJECTS, st.sampled_from([None, 1, 4]))
def test_any_json_object_reads_back_with_a_line_for_every_key(obj, indent):
    text = json.dumps(obj, indent=indent)
    parsed = parse(text)
    assert parsed.error is None and parsed.hjson_only is None and parsed.config == obj
    assert set(parsed.lines) == set(_paths(obj))
    lines = text.splitlines()
    for path, line in parsed.lines.items():
        assert json.dumps(path.rpartition(".")[2])[1:-1] in lines[line - 1] or "." in path


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:/#*\n 0123456789abtrue\\', max_size=200))
def test_parse_never_raises_on_json_like_noise(text):
    parsed = parse(text)
    assert (parsed.config is None) == (parsed.error is not None)


@real_deepspeed
def _validated_values():
    configs = [{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage}}
               for stage in (0, 3, "3", 2.0, True, 4, -1, "three", None)]
    return configs + [
        {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3, section: {"device": device}}}
        for section in ("offload_param", "offload_optimizer")
        for device in ("none", "cpu", "nvme", "cuda", "CPU", "auto", None, 1)]


def test_real_deepspeed_agrees_on_the_values_it_validates(deepspeed_answer):
    """GD307 calls a ZeRO stage or offload device wrong exactly when DeepSpeed's pydantic model rejects it."""
    configs = _validated_values()
    answer = deepspeed_answer["asked"]["values"]["configs"]
    rejected = ["Input should be" in result for result in answer]
    fired = [any("raises ValidationError (\"Input should be" in f.message
                 for f in findings(config_facts(json.dumps(config)), [find_rule("GD307")]).findings)
             for config in configs]
    assert fired == rejected, list(zip(configs, answer, fired))
    assert any(rejected) and not all(rejected)
