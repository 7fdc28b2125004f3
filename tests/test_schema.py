"""The fact schema (rules/facts.toml) is the one definition of the facts: the docs are generated from it, rules
and probes agree with it, and everything that writes facts writes only keys it declares."""

import ast
import dataclasses
import json
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, SHARED

from gpudoctor import schema
from gpudoctor.catalog import load_catalog
from gpudoctor.errors import InputError
from gpudoctor.fact_types import type_error
from gpudoctor.facts import Facts, contract
from gpudoctor.facts.contract import UndeclaredFact
from gpudoctor.gather import Request, gather
from gpudoctor.probes import ProbeContext, all_probes, run_probes

CHECKS = ROOT / "gpudoctor" / "checks"
IO_MODULES = {"os", "pathlib", "subprocess", "shutil", "socket", "glob", "io", "tempfile", "urllib", "requests",
              "ctypes", "multiprocessing", "threading"}
IO_CALLS = {"open", "exec", "eval", "compile", "__import__", "input"}


def test_docs_snapshot_md_is_generated_from_the_schema():
    text = (ROOT / "docs" / "snapshot.md").read_text(encoding="utf-8")
    assert text == schema.markdown(), "docs/snapshot.md is stale: python -m gpudoctor.schema > docs/snapshot.md"


def test_every_group_is_well_formed():
    for group in schema.groups().values():
        assert group.shape in schema.SHAPES, group.name
        assert group.source, group.name
        assert group.shape == "map" or group.keys, f"{group.name}: declare its keys"
        for path in group.fields:
            parent, _, key = path.rpartition(".")
            keys = group.fields[parent] if parent else group.keys
            assert key in keys, f"{group.name}.fields.{path}: {key} is not a key of {group.name}.{parent or 'keys'}"


def structured(group):
    """(path, key) of every key whose value holds objects: a list or an object that is no map of plain values."""
    tables = {"": group.keys, **group.fields}
    for prefix, keys in tables.items():
        for key in keys.values():
            kind = key.type.replace(" or null", "")
            if kind in ("list", "object", "list or object", "object or list") or kind.startswith("map of object"):
                yield (f"{prefix}.{key.name}" if prefix else key.name), key


def test_every_structured_key_declares_its_fields():
    """A key that holds objects names their keys (`[GROUP.fields.KEY]`, nested `[GROUP.fields."KEY.SUB"]`); a map
    whose keys are names (`torch.cuda_wheels`) is typed `map`."""
    missing = [f"{group.name}.{path}" for group in schema.groups().values() for path, _ in structured(group)
               if path not in group.fields]
    assert missing == [], "declare their fields in rules/facts.toml, or type a map of names `map`"
    assert sum(1 for group in schema.groups().values() for _ in structured(group)) >= 80


def test_probes_and_schema_name_each_other():
    named = {group.probe for group in schema.groups().values() if group.probe}
    assert named == set(all_probes()), "every probe gathers a group of the schema, and only probes that exist"


def test_every_rule_reads_only_declared_facts():
    for rule in load_catalog():
        for need in rule.needs + rule.optional:
            error = schema.path_error(need.split("."))
            assert error is None, f"{rule.id} needs {need}: {error}"


def test_undeclared_finds_unknown_groups_keys_and_fields():
    assert schema.undeclared({"host": {"hostname": "a"}, "env": {"ANYTHING": "1"}}) == []
    facts = {"nope": {}, "host": {"hostnam": "a"}, "nvml": {"gpus": [{"name": "T4", "colour": "red"}]},
             "inputs": [{"path": "x", "kind": "file", "error": "e", "why": 1}]}
    assert schema.undeclared(facts) == ["host.hostnam", "inputs.why", "nope", "nvml.gpus.colour"]
    deep = {"launch": {"jobs": [{"path": "a", "launchers": [{"name": "srun", "optoins": {}}]}]},
            "logs": {"hosts": {"node-1": {"network": "IB", "netwrok_at": {}}}, "counts": {"anything": 1}}}
    assert schema.undeclared(deep) == ["launch.jobs.launchers.optoins", "logs.hosts.*.netwrok_at"]


# ------------------------------------------------------------------------ reads in tests hold to the schema

def test_tests_read_facts_strictly():
    assert contract.strict(), "tests/conftest.py sets GPUDOCTOR_STRICT_FACTS=1"


def test_a_misspelt_fact_read_fails_in_tests_and_says_where_to_declare_it():
    facts = Facts({"launch": {"jobs": [{"path": "job.sbatch", "command": "srun python train.py",
                                        "launchers": [{"name": "srun", "options": {"--nodes": "2"}}]}]},
                   "logs": {"hosts": {"node-1": {"network": "IB"}}}})
    job = facts.get("launch.jobs")[0]
    assert job.get("command") == "srun python train.py" and job["launchers"][0]["options"]["--nodes"] == "2"
    assert facts.get("logs.hosts")["node-1"]["network"] == "IB"  # a map's keys are names: any is read
    with pytest.raises(UndeclaredFact, match=r"launch.jobs has no key 'comand'; declare it in \[launch.fields.jobs\]"):
        job.get("comand")
    with pytest.raises(UndeclaredFact, match=r'\[launch.fields."jobs.launchers"\] of rules/facts.toml'):
        _ = "option" in job["launchers"][0]
    with pytest.raises(UndeclaredFact, match=r"logs.hosts.node-1 has no key 'netwrok'.*\[logs.fields.hosts\]"):
        facts.get("logs.hosts")["node-1"].get("netwrok")
    with pytest.raises(UndeclaredFact, match=r"launch has no key 'jbos'.*\[launch.keys\]"):
        facts.get("launch.jbos", [])  # absent or not, a misspelt path is an error, not an unknown fact
    with pytest.raises(UndeclaredFact, match="nvml.gpus has no key 'colour'"):
        facts.get("nvml.gpus.colour", None)


def test_a_misspelt_read_in_a_rule_fails_the_test_instead_of_passing_the_rule():
    from gpudoctor.catalog import find_rule
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    def misspelt(facts, rule):
        return [rule.finding("x") for job in facts.get("launch.jobs", []) if job.get("ranks_per_nod")]

    rule = dataclasses.replace(find_rule("GD601"), own_check=misspelt, inputs=())
    snapshot = Snapshot(facts={"launch": {"jobs": [{"path": "job.sh", "ranks_per_node": 8}]}})
    with pytest.raises(UndeclaredFact, match="ranks_per_nod"):
        evaluate(snapshot, [rule])


def test_outside_tests_reads_are_not_checked(monkeypatch):
    monkeypatch.delenv(contract.VARIABLE)
    facts = Facts({"launch": {"jobs": [{"path": "job.sh"}]}})
    assert facts.get("launch.jbos", None) is None
    assert type(facts.get("launch.jobs")[0]) is dict and facts.get("launch.jobs")[0].get("comand") is None


def test_every_message_of_the_atlas_states_declared_event_fields():
    """A log event carries the named groups of its message's pattern (gpudoctor.ingest.logs): each is a field of
    logs.events, so a rule reading it reads a declared one."""
    from gpudoctor.ingest import atlas

    fields = schema.groups()["logs"].fields["events"]
    undeclared = sorted({f"{message.id}: {name}" for message in atlas.messages()
                         for name in message.pattern.groupindex if name not in fields})
    assert undeclared == [], "declare each in [logs.fields.events] of rules/facts.toml"


@pytest.mark.slow
def test_live_probes_write_only_declared_keys(probes_once):
    facts, results = run_probes(all_probes().values(), ProbeContext(timeout=60.0))
    assert {result.name for result in results if result.status == "ok"} >= {"env", "system", "nvcc", "torch"}
    assert schema.undeclared(facts) == []
    quick, _ = run_probes([all_probes()["torch"]], ProbeContext(timeout=60.0, quick=True))
    assert quick["torch"].get("quick") is True and schema.undeclared(quick) == []


@pytest.mark.parametrize("path", sorted((FIXTURES / "machines").glob("*.json")), ids=lambda p: p.name)
def test_recorded_snapshots_hold_only_declared_keys(path):
    assert schema.undeclared(json.loads(path.read_text())["facts"]) == []


def report_files():
    files = [path for folder in ("reports", "pastes", "logs") for path in sorted((FIXTURES / folder).iterdir())]
    if SHARED.is_dir():
        files += sorted((SHARED / "corpus").glob("*.txt")) + sorted((SHARED / "corpus" / "formats").glob("*"))
    return [path for path in files if path.is_file()]


def contract_breaches(facts) -> list:
    """The paths facts.toml does not declare, at every depth, and a value of the wrong type."""
    wrong = type_error(facts)
    return schema.undeclared(facts) + ([wrong] if wrong else [])


def test_report_readers_write_only_declared_fields():
    """Every pasted format's parser and the log reader, over every pasted text and log the fixtures hold."""
    read = 0
    for path in report_files():
        try:
            facts = gather(Request(reports=(str(path),))).facts
        except InputError:
            continue
        read += 1
        assert contract_breaches(facts) == [], f"{path.name}: declare these in rules/facts.toml"
    assert read >= 150


def test_run_readers_write_only_declared_fields():
    """Every rank's logs of a run read together (run, logs)."""
    runs = [FIXTURES / "runs" / "mismatch"] + [path for path in sorted((FIXTURES / "runs").glob("*/*"))
                                              if path.is_dir()]
    for path in runs:
        facts = gather(Request(reports=(str(path),))).facts
        assert contract_breaches(facts) == [], f"{path.name}: declare these in rules/facts.toml"
    assert len(runs) >= 10


def test_file_readers_write_only_declared_fields():
    names = [str(path) for folder in ("jobs", "scripts", "ds_configs", "launch")
             for path in sorted((FIXTURES / folder).rglob("*")) if path.is_file() and path.suffix != ".md"]
    snapshot = gather(Request(files=tuple(names)))
    assert {"env", "env_sources", "scripts", "ds_config", "requests", "inputs", "launch"} <= set(snapshot.facts)
    assert contract_breaches(snapshot.facts) == [], "declare these in rules/facts.toml"
    model = gather(Request(snapshot=str(FIXTURES / "machines" / "t4-cu121.json"),
                           model=str(FIXTURES / "models" / "qwen2.5-0.5b.config.json"), training={"micro_batch": 2}))
    assert contract_breaches(model.facts) == []


def test_policy_validates_fact_paths_against_the_schema():
    from gpudoctor.policy import compile_rule, known_groups

    table = {"id": "SITE001", "name": "x", "severity": "warning", "message": "m",
             "require": {"fact": "nvml.gpus[*].colour", "op": "eq", "value": 1}}
    with pytest.raises(Exception, match="nvml.gpus has no key 'colour'"):
        compile_rule(table, known_groups())
    table["require"] = {"fact": "model.paramz", "op": "gt", "value": 1}
    with pytest.raises(Exception, match="model has no key 'paramz'"):
        compile_rule(table, known_groups())


# ---------------------------------------------------------------------------------------- rules are pure

def io_uses(path: Path) -> list:
    uses = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            uses += [alias.name for alias in node.names if alias.name.split(".")[0] in IO_MODULES]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if (node.module or "").split(".")[0] in IO_MODULES:
                uses.append(node.module)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_CALLS:
            uses.append(f"{node.func.id}()")
    return uses


def test_rules_perform_no_io():
    """A rule is a pure function of the snapshot: what it needs, a probe records."""
    offenders = {path.name: io_uses(path) for path in sorted(CHECKS.glob("*.py")) if io_uses(path)}
    assert offenders == {}


def test_the_io_scan_sees_io(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os.path\nfrom pathlib import Path\nimport subprocess\ndef f():\n    return open('x')\n")
    assert io_uses(sample) == ["os.path", "pathlib", "subprocess", "open()"]


def gd106(nvcc_facts):
    from gpudoctor.catalog import find_rule
    from gpudoctor.engine import evaluate
    from gpudoctor.snapshot import Snapshot

    report = evaluate(Snapshot(facts={"nvcc": nvcc_facts, "env": {}}), [find_rule("GD106")])
    return [f.rule for f in report.findings]


def test_a_rule_resolves_symlinks_from_the_snapshot_not_from_this_machine(tmp_path):
    """CUDA_HOME is a symlink to the 11.8 toolkit while nvcc on PATH is 12.4 (GD106). The verdict comes from the
    realpaths the probe recorded; this machine's filesystem (where the same path may point anywhere) plays no part."""
    target = tmp_path / "cuda-11.8"
    target.mkdir()
    link = tmp_path / "cuda"
    link.symlink_to(target)
    facts = {"path": "/opt/cuda-12.4/bin/nvcc", "version": "12.4", "cuda_home": str(link), "cuda_path": None,
             "toolkits": [{"path": str(target), "version": "11.8"}]}
    assert gd106({**facts, "realpaths": {str(link): str(target)}}) == ["GD106"]
    # recorded elsewhere, without the link: compared as written, whatever this machine's filesystem says
    assert gd106(facts) == []


def test_the_nvcc_probe_records_realpaths(tmp_path):
    from gpudoctor.probes.nvcc import probe_nvcc

    target = tmp_path / "cuda-11.8"
    target.mkdir()
    link = tmp_path / "cuda"
    link.symlink_to(target)
    facts = probe_nvcc(ProbeContext(timeout=10.0, environ={"CUDA_HOME": str(link), "PATH": ""}))["nvcc"]
    assert facts["realpaths"][str(link)] == str(target)
    assert str(target) in [toolkit["path"] for toolkit in facts["toolkits"]]
