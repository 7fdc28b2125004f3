"""One function decides every verdict (gpudoctor.verdict.decide): a table of every combination of what it is given —
what the rule returned, the paths it read (stated, absent or unknown, and where each came from), the inputs the run
has, what the logs prove and show, and the rule's catalog entry — and the verdict each gets. Then the reads and the
provenance it is given, as the engine records them from real snapshots."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import ROOT

from gpudoctor.catalog import Rule, find_rule
from gpudoctor.engine import evaluate
from gpudoctor.facts import ABSENT, STATED, UNKNOWN, Facts, MissingFact, Read
from gpudoctor.gather import Request, gather
from gpudoctor.ingest.atlas import messages
from gpudoctor.model import Finding, Severity
from gpudoctor.provenance import base_origin
from gpudoctor.snapshot import from_json
from gpudoctor.verdict import Run, decide

FOUND = Finding("GD999", "a-rule", Severity.ERROR, "the rule's own finding")
LOGGED = Finding("GD999", "a-rule", Severity.ERROR, "what the log proves")
IGNORED = Finding("GD999", "a-rule", Severity.ERROR, "a finding the script's ignore comment drops")


def _rule(inputs=(), needs=("nvml.gpus",), log_shows=()) -> Rule:
    return Rule(id="GD999", name="a-rule", severity=Severity.ERROR, family="nccl", summary="", needs=tuple(needs),
                host=True, fix_applicability="display-only", docs={}, inputs=tuple(inputs), log_shows=tuple(log_shows))


def _reads(*reads) -> dict:
    return {f"path{i}": Read(state, origin) for i, (state, origin) in enumerate(reads)}


def _outcome(verdict) -> tuple:
    if verdict.not_applicable is not None:
        return ("not applicable", verdict.not_applicable.reason)
    if verdict.unknown is not None:
        return ("unknown", verdict.unknown.missing, verdict.unknown.reason)
    if verdict.passed:
        return ("passed",)
    return ("findings",) + tuple(f.message for f in verdict.findings)


MISSING = MissingFact("nvml.gpus", "why it is missing")
STATED_PROBE = _reads((STATED, "probe"))
SHOWS_NCCL = ("nccl",)
NO_NCCL = ("unknown", "logs.shows", "the log does not show NCCL's setup (NCCL INFO lines)")
SUPPRESS = {"suppressed": lambda finding: finding is IGNORED}

TABLE = [  # (what, the rule's catalog entry, the run, the verdict)
    # 1. a pasted text in which nothing was recognised
    ("nothing recognised in the paste", _rule(), Run(recognised=False, findings=(FOUND,)), ("unknown", "report", "")),
    # 2. not applicable
    ("none of its inputs given", _rule(inputs=("ds_config", "scripts")), Run(given=frozenset({"logs"})),
     ("not applicable", "no DeepSpeed config")),
    ("none given, but the log proves it", _rule(inputs=("ds_config",)), Run(from_log=(LOGGED,)),
     ("findings", "what the log proves")),
    ("one of its inputs given", _rule(inputs=("ds_config", "scripts")),
     Run(given=frozenset({"scripts"}), reads=STATED_PROBE), ("passed",)),
    # 3. what the log proves
    ("the log proves it where a fact is unknown", _rule(), Run(missing=MISSING, from_log=(LOGGED,)),
     ("findings", "what the log proves")),
    ("the log proves it where the rule found nothing", _rule(), Run(reads=STATED_PROBE, from_log=(LOGGED,)),
     ("findings", "what the log proves")),
    ("the rule's own findings before the log's", _rule(), Run(findings=(FOUND,), from_log=(LOGGED,)),
     ("findings", "the rule's own finding")),
    # 4. unknown
    ("a fact it needs is unknown", _rule(), Run(missing=MISSING), ("unknown", "nvml.gpus", "why it is missing")),
    ("unknown even where other reads are stated", _rule(), Run(missing=MISSING, reads=STATED_PROBE),
     ("unknown", "nvml.gpus", "why it is missing")),
    # 5. findings
    ("findings", _rule(), Run(findings=(FOUND,)), ("findings", "the rule's own finding")),
    ("findings, one ignored in the script", _rule(), Run(findings=(FOUND, IGNORED), **SUPPRESS),
     ("findings", "the rule's own finding")),
    ("every finding ignored in the script", _rule(), Run(findings=(IGNORED,), **SUPPRESS), ("passed",)),
    ("findings on a paste's facts alone", _rule(), Run(findings=(FOUND,), base="report"),
     ("findings", "the rule's own finding")),
    # 6. a pass on the log alone
    ("log only, the log shows the part", _rule(inputs=("logs",), log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), shows=SHOWS_NCCL, base="report"), ("passed",)),
    ("log only, the log does not show the part", _rule(inputs=("logs",), log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), shows=("run",), reads=_reads((STATED, "log"))), NO_NCCL),
    ("log only, either part shown", _rule(inputs=("logs",), log_shows=("exit", "kernel")),
     Run(given=frozenset({"logs"}), shows=("kernel",), reads=_reads((STATED, "log"))), ("passed",)),
    ("log and another declared input given: not on the log alone",
     _rule(inputs=("logs", "scripts"), log_shows=("nccl",)),
     Run(given=frozenset({"logs", "scripts"}), reads=_reads((STATED, "files"))), ("passed",)),
    ("log given, the machine facts read only qualify it", _rule(inputs=("logs", "fleet.nodes"), log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), reads=_reads((STATED, "log"), (STATED, "snapshot"))), NO_NCCL),
    ("no input declared, stated facts only from the log", _rule(log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), reads=_reads((STATED, "log"), (UNKNOWN, "report"))), NO_NCCL),
    ("no input declared, a stated fact from elsewhere", _rule(log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), reads=_reads((STATED, "log"), (STATED, "report"))), ("passed",)),
    ("no input declared, a variable the whole environment does not set", _rule(log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), reads=_reads((STATED, "log"), (ABSENT, "snapshot"))), ("passed",)),
    ("no input declared, beside the log's facts one the paste leaves empty", _rule(log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), reads=_reads((STATED, "log"), (ABSENT, "report"))), NO_NCCL),
    ("no input declared, nothing stated, the log shows the part", _rule(log_shows=("nccl",)),
     Run(given=frozenset({"logs"}), shows=SHOWS_NCCL, reads=_reads((UNKNOWN, "report"))), ("passed",)),
    ("log_shows, but no log given", _rule(log_shows=("nccl",)), Run(reads=STATED_PROBE), ("passed",)),
    # 7. a pass that rests on nothing
    ("nothing stated, read from a paste", _rule(), Run(reads=_reads((UNKNOWN, "report"), (ABSENT, "report"))),
     ("unknown", "nvml.gpus", "")),
    ("nothing stated, read from a log", _rule(needs=("logs", "env")), Run(reads=_reads((ABSENT, "log"))),
     ("unknown", "logs", "")),
    ("nothing stated from a paste, the rule needs nothing", _rule(needs=()), Run(reads=_reads((UNKNOWN, "report"))),
     ("unknown", "report", "")),
    ("nothing read at all from a paste", _rule(), Run(base="report"), ("unknown", "nvml.gpus", "")),
    ("a stated fact of a paste", _rule(), Run(reads=_reads((STATED, "report"), (UNKNOWN, "report"))), ("passed",)),
    ("a stated fact of a job file beside a paste's", _rule(),
     Run(reads=_reads((STATED, "files"), (UNKNOWN, "report"))), ("passed",)),
    ("nothing stated, read from a whole environment", _rule(), Run(reads=_reads((ABSENT, "probe"), (ABSENT, "files"))),
     ("passed",)),
    ("nothing stated, read from a recorded snapshot", _rule(), Run(reads=_reads((UNKNOWN, "snapshot"))), ("passed",)),
    ("a variable a job file leaves unset beside a paste's unknowns", _rule(),
     Run(reads=_reads((ABSENT, "files"), (UNKNOWN, "report"))), ("passed",)),
    ("the command line states it", _rule(), Run(reads=_reads((STATED, "command line"))), ("passed",)),
    # 8. passed
    ("stated facts of a live probe", _rule(), Run(reads=STATED_PROBE), ("passed",)),
    ("nothing read on a live machine", _rule(), Run(), ("passed",)),
]


@pytest.mark.parametrize("what,rule,run,expected", TABLE, ids=[row[0] for row in TABLE])
def test_the_verdict_table(what, rule, run, expected):
    assert _outcome(decide(rule, run)) == expected


# every combination of what decide is given, as values each question tells apart
DIMENSIONS = {
    "recognised": [True, False],
    "inputs": [(), ("logs",), ("ds_config",), ("logs", "scripts")],
    "given": [frozenset(), frozenset({"logs"}), frozenset({"logs", "scripts"}), frozenset({"ds_config"})],
    "log_shows": [(), ("nccl",)],
    "shows": [(), ("nccl",)],
    "returned": ["nothing", "findings", "missing", "ignored"],
    "from_log": [(), (LOGGED,)],
    "reads": [{}, STATED_PROBE, _reads((STATED, "log")), _reads((UNKNOWN, "report")), _reads((ABSENT, "files")),
              _reads((ABSENT, "report"))],
    "base": ["probe", "report"],
}


def _combinations():
    for values in itertools.product(*DIMENSIONS.values()):
        yield dict(zip(DIMENSIONS, values))


def test_every_combination_gets_exactly_one_verdict_and_never_a_false_pass():
    count = 0
    for case in _combinations():
        rule = _rule(inputs=case["inputs"], log_shows=case["log_shows"])
        returned = case["returned"]
        run = Run(recognised=case["recognised"], given=case["given"], shows=case["shows"], from_log=case["from_log"],
                  reads=case["reads"], base=case["base"], **SUPPRESS,
                  findings=(FOUND,) if returned == "findings" else (IGNORED,) if returned == "ignored" else (),
                  missing=MISSING if returned == "missing" else None)
        verdict = decide(rule, run)
        outcomes = [bool(verdict.findings), verdict.passed, verdict.unknown is not None,
                    verdict.not_applicable is not None]
        assert sum(outcomes) == 1, case
        if verdict.passed:
            assert case["recognised"] and returned != "missing", case
            assert not case["from_log"] or returned == "ignored", case  # the rule's own finding, ignored, comes first
            known = [read for read in case["reads"].values()
                     if read.state == STATED or read.state == ABSENT and read.origin not in ("report", "log")]
            origins = {read.origin for read in case["reads"].values()} or {case["base"]}
            assert known or returned == "ignored" or not origins & {"report", "log"} \
                or set(case["log_shows"]) & set(case["shows"]), case
        if verdict.not_applicable is not None:
            assert case["inputs"] and not set(case["inputs"]) & case["given"] and not case["from_log"], case
        if verdict.findings:
            assert IGNORED not in verdict.findings
        count += 1
    assert count == 2 * 4 * 4 * 2 * 2 * 4 * 2 * 6 * 2


# --- what decide is given: the reads and their provenance ---------------------------------------------------------

def test_facts_record_each_path_read_with_its_state_and_origin():
    facts = Facts({"nvml": {"gpus": [], "driver_version": "550.54"}, "torch": {"arch_list": ["sm_90"]},
                   "env": {"NCCL_DEBUG": "INFO"}, "probes": [1]},
                  origins={"nvml": "report", "torch": "report", "torch.arch_list": "log", "env": "report"},
                  base="report")
    assert facts.reads is None  # outside a rule's run nothing is recorded
    facts.get("nvml.driver_version")
    with facts.recording() as reads:
        facts.get("nvml.driver_version")
        facts.get("nvml.gpus")
        facts.get("torch.arch_list")
        facts.get("torch.cuda", None)
        facts.get("probes")  # bookkeeping the engine adds: not a fact of the run
        assert facts.env("NCCL_DEBUG") == "INFO"
        assert facts.env("NCCL_IB_HCA") is None
        with pytest.raises(MissingFact) as missing:
            facts.get("host.shm_bytes")
    assert reads == {"nvml.driver_version": Read(STATED, "report"), "nvml.gpus": Read(ABSENT, "report"),
                     "torch.arch_list": Read(STATED, "log"), "torch.cuda": Read(UNKNOWN, "report"),
                     "env.NCCL_DEBUG": Read(STATED, "report"), "env.NCCL_IB_HCA": Read(UNKNOWN, "report"),
                     "host.shm_bytes": Read(UNKNOWN, "report")}
    assert missing.value.path == "host.shm_bytes"


def test_a_variable_a_whole_environment_does_not_set_is_known_unset():
    live = Facts({"env": {"PATH": "/usr/bin"}})
    with live.recording() as reads:
        assert live.get("env.NCCL_P2P_DISABLE") is None
    assert reads == {"env.NCCL_P2P_DISABLE": Read(ABSENT, "probe")}
    pasted = Facts({"env": {"LD_LIBRARY_PATH": "/usr/lib"}}, origins={"env": "report"}, base="report")
    with pytest.raises(MissingFact) as missing:
        pasted.get("env.NCCL_P2P_DISABLE")
    assert (missing.value.path, missing.value.reason) == \
        ("env", "the report does not show the job's environment (NCCL_P2P_DISABLE)")
    with pytest.raises(MissingFact):
        Facts({}).get("env.NCCL_P2P_DISABLE")  # no environment recorded at all


def test_what_several_rules_work_out_alike_is_worked_out_once_and_each_has_its_reads():
    """Facts.once (the GPUs a job uses, which several rules ask for): the function runs once per snapshot; every rule
    that asks has the reads it made recorded as its own, and the MissingFact it raised raised again."""
    facts = Facts({"nvml": {"driver_version": "550.54"}}, origins={"nvml": "report"}, base="report")
    ran = []

    def driver(facts):
        ran.append("driver")
        return facts.get("nvml.driver_version")

    def torch(facts):
        ran.append("torch")
        return facts.get("torch.version")

    assert facts.once(driver) == "550.54"  # outside a rule's run (what a log proves): nothing recorded
    for _ in range(2):
        with facts.recording() as reads:
            assert facts.once(driver) == "550.54"
        assert reads == {"nvml.driver_version": Read(STATED, "report")}
        with facts.recording() as reads, pytest.raises(MissingFact) as missing:
            facts.once(torch)
        assert missing.value.path == "torch.version" and reads == {"torch.version": Read(UNKNOWN, "report")}
    assert ran == ["driver", "torch"]


def test_a_paste_and_its_logs_record_where_each_group_came_from(tmp_path):
    paste = tmp_path / "paste.txt"
    paste.write_text((ROOT / "fixtures" / "reports" / "collect_env_rtx3090_driver470_cu121.txt").read_text()
                     + (ROOT / "fixtures" / "logs" / "nccl_single_node_socket.log").read_text())
    snapshot = gather(Request(reports=[str(paste)]))
    assert snapshot.origins["torch"] == "report" and snapshot.origins["logs"] == "log"
    assert Facts(snapshot.facts, snapshot.origins, "report").origin("nvml.gpus") == "report"


def test_a_fact_only_a_log_message_states_comes_from_the_log(tmp_path):
    """torch's 'The detected CUDA version (12.1) mismatches the version that was used to compile PyTorch (11.3)'
    states nvcc's CUDA and torch's; beside a collect_env that states torch's, only nvcc's is the log's."""
    (sample,) = [m.samples[0].text for m in messages() if m.id == "torch-cpp-extension-cuda-mismatch"]
    log = tmp_path / "build.log"
    log.write_text(sample + "\n")
    snapshot = gather(Request(reports=[str(log)]))
    assert snapshot.facts["nvcc"]["version"] and snapshot.facts["torch"]["cuda"]
    assert snapshot.origins["nvcc"] == snapshot.origins["torch"] == "log"
    paste = str(ROOT / "fixtures" / "reports" / "collect_env_pypi_wheel_no_tag.txt")  # no nvcc in it
    both = gather(Request(reports=[paste, str(log)]))
    facts = Facts(both.facts, both.origins, "report")
    assert (facts.origin("torch.cuda"), facts.origin("nvcc.version")) == ("report", "log")


def test_job_files_and_the_command_line_on_a_paste_are_theirs(tmp_path):
    env_file = tmp_path / "job.env"
    env_file.write_text("NCCL_P2P_DISABLE=1\n")
    paste = str(ROOT / "fixtures" / "reports" / "collect_env_rtx3090_driver470_cu121.txt")
    snapshot = gather(Request(reports=[paste], env_files=[str(env_file)], model="7B"))
    assert snapshot.origins["env"] == "files" and snapshot.origins["model"] == "command line"
    assert snapshot.origins["torch"] == "report"


def test_a_recorded_snapshot_and_the_logs_laid_over_it(tmp_path):
    machine = str(ROOT / "fixtures" / "machines" / "h100x8-healthy.json")
    log = str(ROOT / "fixtures" / "logs" / "nccl_ib_healthy_2nodes.log")
    snapshot = gather(Request(snapshot=machine, reports=[log]))
    facts = Facts(snapshot.facts, snapshot.origins, "snapshot")
    assert facts.origin("nvml.gpus") == "snapshot" and facts.origin("logs.hosts") == "log"


def _two_gpus_paste(tmp_path, env: str = ""):
    paste = tmp_path / "smi.txt"
    paste.write_text((ROOT / "fixtures" / "reports" / "nvidia_smi_470_table.txt").read_text())
    files = []
    if env:
        (tmp_path / "job.env").write_text(env)
        files = [str(tmp_path / "job.env")]
    return evaluate(gather(Request(reports=[str(paste)], env_files=files)), [find_rule("GD405")])


def test_gd405_is_unknown_on_a_paste_without_the_environment_and_judged_with_an_env_file(tmp_path):
    report = _two_gpus_paste(tmp_path)
    assert [(u.missing, u.reason) for u in report.unknown] == \
        [("env", "the report does not show the job's environment (NCCL_P2P_DISABLE)")]
    report = _two_gpus_paste(tmp_path, "NCCL_DEBUG=INFO\n")
    assert report.unknown == () and report.passed == ("GD405",)


def test_a_snapshot_keeps_its_origins_when_written_and_read_back(tmp_path):
    log = str(ROOT / "fixtures" / "logs" / "nccl_single_node_socket.log")
    paste = str(ROOT / "fixtures" / "reports" / "collect_env_pypi_wheel_no_tag.txt")
    snapshot = gather(Request(reports=[paste, log]))
    again = from_json(json.loads(json.dumps(snapshot.to_json())), "run.json")
    assert again.origins == snapshot.origins and again.origins["logs"] == "log"
    assert Facts(again.facts, again.origins, base_origin(again.source)).origin("host.shm_bytes") == "report"


def test_a_snapshot_recorded_from_a_log_is_judged_as_the_log_is():
    """`snapshot --from LOG -o run.json` then `fleet run.json` passed GD003, GD107, GD303 and GD407 on a log that
    shows no environment and no input files (`check --from LOG` leaves them unknown): read back, the facts lost
    that they came from a log."""
    rules = [find_rule(rule_id) for rule_id in ("GD003", "GD107", "GD303", "GD407")]
    log = str(ROOT / "fixtures" / "logs" / "srun_two_nodes_nccl_mismatch.log")
    from_log = evaluate(gather(Request(reports=[log])), rules)
    recorded = evaluate(gather(Request(snapshot=str(ROOT / "fixtures" / "fleet" / "srun-two-nodes-logs.json"))), rules)
    assert from_log.passed == recorded.passed == ()
    assert [u.rule for u in recorded.unknown] == [u.rule for u in from_log.unknown] == [r.id for r in rules]


def test_a_log_laid_over_a_machine_takes_nothing_from_what_the_machine_knows():
    """GD301 passes on a recorded machine whose environment asks for no DeepSpeed pre-build; its run's log (which
    shows no build) laid over it left GD301 unknown ('the log does not show an extension build'): the variables
    the machine's environment does not set are known, and the pass stands on them, not on the log alone."""
    rules = [find_rule("GD301")]
    machine = str(ROOT / "fixtures" / "machines" / "h100x8-healthy.json")
    alone = evaluate(gather(Request(snapshot=machine)), rules)
    with_log = evaluate(gather(Request(snapshot=machine, reports=[str(ROOT / "fixtures" / "logs" / "dmesg_xid.txt")])),
                        rules)
    assert alone.passed == with_log.passed == ("GD301",)


def test_only_the_verdict_module_makes_a_rule_unknown_or_not_applicable():
    """Nothing else decides: no other module of gpudoctor builds an Unknown or a NotApplicable verdict."""
    import ast

    makers = set()
    for path in (ROOT / "gpudoctor").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("Unknown", "NotApplicable"):
                makers.add(path.relative_to(ROOT).as_posix())
    assert makers == {"gpudoctor/verdict.py"}
