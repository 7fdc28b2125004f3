"""deploy/slurm/prolog.sh and taskprolog.sh against a REAL single-node SLURM cluster (munged + slurmctld + slurmd
from Debian's packages, started here under a temporary directory, recipe: ../shared/slurm.md).

slurm.conf points Prolog= and TaskProlog= at this checkout's scripts; the hooks' gpudoctor.conf (next to slurm.conf,
where the scripts look for it) runs this interpreter's `-m gpudoctor`. Each test rewrites gpudoctor.conf: slurmd
runs the prolog fresh for every job, and the prolog sources the conf each time.

How the "bad node" is made, honestly: this machine has no GPU, so its live check passes. The bad-node test gives
the prolog `GPUDOCTOR_ARGS=--snapshot fixtures/machines/k8s-pod-a100x8.json` (a recorded A100 pod with 64 MiB
/dev/shm and uncorrectable ECC errors on GPU 3): the real gpudoctor evaluates the real rules on those facts, exits
1, and the real prolog drains the real node through scontrol. Only the facts are recorded.

Skipped (with the reason) only when the SLURM packages are missing or we are not root, and never in CI
(CI set): .ci/run installs them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT, required_or_skip

PROLOG = ROOT / "deploy" / "slurm" / "prolog.sh"
TASKPROLOG = ROOT / "deploy" / "slurm" / "taskprolog.sh"
BAD_MACHINE = FIXTURES / "machines" / "k8s-pod-a100x8.json"
POLICY = FIXTURES / "policies" / "site.toml"
DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol", "squeue", "scancel")


def _missing_reason():
    missing = [name for name in DAEMONS if shutil.which(name) is None and not Path("/usr/sbin", name).exists()]
    if missing:
        return ("SLURM packages not installed (missing: " + ", ".join(missing) + "); apt-get install slurmctld slurmd "
                "slurm-client munge")
    if os.geteuid() != 0:
        return "the SLURM test cluster needs root (slurmd runs jobs and drains nodes as root, mknod for fake GPUs)"
    return None


def _which(name):
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Cluster:
    def __init__(self, base: Path):
        self.base = base
        self.node = socket.gethostname().split(".")[0]
        self.env = dict(os.environ, SLURM_CONF=str(base / "slurm.conf"))
        self.logdir = base / "gdlog"
        self.pids = []

    def run(self, *argv, timeout=30, env=None):
        return subprocess.run([_which(argv[0]), *argv[1:]], env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def state(self):
        out = self.run("sinfo", "-h", "-N", "-n", self.node, "-o", "%N|%T|%E").stdout.strip()
        _node, state, reason = (out.split("|", 2) + ["", ""])[:3]
        return state, reason

    def wait_state(self, wanted, seconds=15):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            state, reason = self.state()
            if state == wanted:
                return reason
            time.sleep(0.1)
        pytest.fail(f"node {self.node} not {wanted!r} after {seconds}s: {self.state()}\n{self.logs()}")

    def logs(self):
        text = []
        for path in [self.base / "log" / "slurmd.log", self.base / "log" / "slurmctld.log",
                     self.logdir / "prolog.log"]:
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-25:]
                text.append(f"--- {path.name} (tail)\n" + "\n".join(tail))
        return "\n".join(text)

    def configure(self, **settings):
        """Write the hooks' gpudoctor.conf (next to slurm.conf) with this interpreter's gpudoctor, from this
        checkout (slurmd gives its hooks no PYTHONPATH: an installed gpudoctor elsewhere would answer instead)."""
        values = {"GPUDOCTOR": f"env PYTHONPATH={ROOT} {sys.executable} -m gpudoctor",
                  "GPUDOCTOR_LOG_DIR": str(self.logdir),
                  "SCONTROL": _which("scontrol"), "GPUDOCTOR_TIMEOUT": "40"}
        values.update(settings)
        (self.base / "gpudoctor.conf").write_text("".join(f"{key}='{value}'\n" for key, value in values.items()))

    def srun(self, *argv, extra=(), timeout=60):
        # -I: never wait for a drained node (srun would queue forever)
        return self.run("srun", "-N1", "-I10", *extra, *argv, timeout=timeout)

    def resume(self):
        self.run("scontrol", "update", f"nodename={self.node}", "state=resume")
        self.wait_state("idle")

    def last_job(self):
        log = (self.logdir / "prolog.log").read_text()
        return log.splitlines()[-1]


def _start(base: Path) -> Cluster:
    cluster = Cluster(base)
    for sub in ("munge", "state", "spool", "log", "run", "dev"):
        (base / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o755)
    os.chmod(base / "munge", 0o711)  # munged: the socket's directory needs o+x
    key = base / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    subprocess.run([_which("munged"), f"--socket={base}/munge/munge.socket", f"--key-file={key}",
                    f"--pid-file={base}/munge/munged.pid", f"--log-file={base}/munge/munged.log",
                    f"--seed-file={base}/munge/munged.seed"], check=True, timeout=30)
    cluster.pids.append(int((base / "munge" / "munged.pid").read_text()))
    for index in range(2):  # fake GPUs: character devices, as gres.conf requires
        os.mknod(base / "dev" / f"nvidia{index}", 0o600 | 0o020000, os.makedev(195, index))
    node = cluster.node
    cpus = min(2, os.cpu_count() or 1)
    (base / "gres.conf").write_text(f"NodeName={node} Name=gpu File={base}/dev/nvidia[0-1]\n")
    (base / "slurm.conf").write_text(f"""\
ClusterName=gdtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={base}/munge/munge.socket
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=debug
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
Prolog={PROLOG}
TaskProlog={TASKPROLOG}
PrologFlags=Alloc
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
GresTypes=gpu
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=1000 Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes={node} Default=YES MaxTime=INFINITE State=UP
""")
    cluster.configure()
    for daemon in ("slurmctld", "slurmd"):  # both fork; their PIDs go to run/*.pid
        subprocess.run([_which(daemon)], env=cluster.env, check=True, timeout=30)
    for daemon in ("slurmctld", "slurmd"):
        pidfile = base / "run" / f"{daemon}.pid"
        deadline = time.monotonic() + 10
        while not pidfile.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        cluster.pids.append(int(pidfile.read_text()))
    cluster.wait_state("idle", seconds=30)
    return cluster


def _stop(cluster: Cluster) -> None:
    try:
        cluster.run("scancel", "--user=root", timeout=10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and cluster.run("squeue", "-h", "-o", "%i", timeout=10).stdout.strip():
            time.sleep(0.1)
    except (subprocess.SubprocessError, OSError):
        pass
    for pid in cluster.pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 15
    for pid in cluster.pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)
        else:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def cluster():
    reason = _missing_reason()
    if reason:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", reason)
    # not under pytest's basetemp: munged wants o+x on every directory above its socket, pytest's are 0700
    base = Path(tempfile.mkdtemp(prefix="gpudoctor-slurm-"))
    started = None
    try:
        started = _start(base)
        yield started
    finally:
        if started is None:  # half started: stop whatever wrote a pid file
            started = Cluster(base)
            for pidfile in (base / "munge" / "munged.pid", base / "run" / "slurmctld.pid", base / "run" / "slurmd.pid"):
                if pidfile.exists():
                    started.pids.append(int(pidfile.read_text()))
        _stop(started)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def node(cluster):
    """The cluster with default hook settings, and the node idle again afterwards whatever the test did."""
    cluster.configure()
    if cluster.state()[0] not in ("idle", "completing"):
        cluster.resume()
    yield cluster
    cluster.configure()
    if cluster.state()[0] not in ("idle", "completing"):
        cluster.resume()


def test_scripts_are_shellcheck_clean():
    if shutil.which("shellcheck") is None:
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", "shellcheck not installed (apt-get install shellcheck)")
    result = subprocess.run(["shellcheck", str(PROLOG), str(TASKPROLOG)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_healthy_node_runs_the_job_and_stays_idle(node, tmp_path):
    marker = tmp_path / "ran"
    result = node.srun("sh", "-c", f'echo "gpus=$CUDA_VISIBLE_DEVICES" > {marker}', extra=["--gres=gpu:1"])
    assert result.returncode == 0, result.stderr + node.logs()
    assert marker.read_text().strip() == "gpus=0"  # the job ran, on a (fake) GPU, after the prolog
    assert node.wait_state("idle") == "none"  # after "completing"
    line = node.last_job()
    assert " ok (" in line, line
    job = line.split("job=")[1].split()[0]
    report = json.loads((node.logdir / f"job-{job}.json").read_text())
    assert report["schema"] == "gpudoctor.report/1"
    assert report["source"]["kind"] == "live"
    assert report["summary"]["error"] == 0
    # the prolog's --select: node rules only, and none of them needs the job's torch (the slow probe)
    assert {item["rule"][:3] for item in report["findings"] + report["unknown"]} <= {"GD0", "GD1", "GD5"}
    assert "torch" not in {probe["name"] for probe in report["probes"]}


def test_bad_node_is_drained_with_the_gpudoctor_reason_and_the_job_does_not_run(node, tmp_path):
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}")
    marker = tmp_path / "ran"
    result = node.srun("touch", str(marker))
    assert result.returncode != 0
    assert not marker.exists(), "the job ran on a node the prolog failed"
    reason = node.wait_state("drained")
    assert reason.startswith("gpudoctor GD503: /dev/shm is 64 MiB"), reason
    assert "also GD506" in reason and "GD502" not in reason  # errors only (FAIL_ON=error); GD502 is a warning
    job = reason.rsplit("job ", 1)[1].rstrip("]")
    report = json.loads((node.logdir / f"job-{job}.json").read_text())
    errors = sorted(item["rule"] for item in report["findings"] if item["severity"] == "error")
    assert errors == ["GD503", "GD506"]
    assert "drained: gpudoctor GD503" in node.last_job()
    # while drained, nothing runs there; after resume (what an admin does once it is fixed) jobs run again
    assert node.srun("true", extra=["-I2"]).returncode != 0
    node.configure()
    node.resume()
    assert node.srun("true").returncode == 0


def test_an_sbatch_job_on_a_drained_node_is_requeued_held(node, tmp_path):
    """docs/hooks.md: a batch job whose Prolog fails is not merely requeued: Slurm holds it (priority 0, reason
    launch_failed_requeued_held) until someone releases it."""
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}")
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/sh\ntrue\n")
    job = node.run("sbatch", "--parsable", "-N1", "-o", str(tmp_path / "out"), str(script)).stdout.strip()
    try:
        reason = node.wait_state("drained")
        assert reason.startswith("gpudoctor GD503: ") and reason.endswith(f"[job {job}]"), reason
        deadline, shown = time.monotonic() + 15, ""
        while time.monotonic() < deadline and "held" not in shown.lower():
            shown = node.run("squeue", "-h", "-j", job, "-o", "%T|%r|%Q").stdout.strip()
            time.sleep(0.2)
        state, why, priority = shown.split("|")
        assert state == "PENDING" and why.replace(" ", "_").lower() == "launch_failed_requeued_held", shown
        assert priority.strip() == "0"
    finally:
        node.run("scancel", job)
        node.configure()
        node.resume()


def test_a_site_policy_runs_in_the_prolog(node):
    """GPUDOCTOR_POLICY: the policy's rules run beside GPUDOCTOR_SELECT's and drain with their own reason."""
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}", GPUDOCTOR_SELECT="GD105", GPUDOCTOR_POLICY=str(POLICY))
    assert node.srun("true").returncode != 0
    reason = node.wait_state("drained")
    assert reason.startswith("gpudoctor SITE001: driver 535.161.08 is older than the site minimum 550"), reason
    assert "also SITE004" in reason


def test_a_typo_in_the_selection_never_passes_the_node_silently(node):
    """GPUDOCTOR_SELECT=GD5O6 (a letter O) matches no rule: a usage error, logged with the closest IDs, never an
    empty check that passes every node."""
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}", GPUDOCTOR_SELECT="GD5O6")
    assert node.srun("true").returncode == 0
    line = node.last_job()
    assert "usage error (exit 2" in line and "did you mean GD506" in line, line


def test_a_check_that_evaluated_no_rule_is_not_logged_as_ok(node, tmp_path):
    """A node whose NVML facts are unknown: GD506 cannot run. The job is allowed, and the log says the node was not
    judged instead of "ok"."""
    snapshot = json.loads(BAD_MACHINE.read_text())
    del snapshot["facts"]["nvml"]
    path = tmp_path / "no-nvml.json"
    path.write_text(json.dumps(snapshot))
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {path}", GPUDOCTOR_SELECT="GD506")
    assert node.srun("true").returncode == 0
    line = node.last_job()
    assert "no rule could be evaluated" in line and " ok (" not in line, line


def test_warning_threshold_is_configurable(node):
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}", GPUDOCTOR_SELECT="GD502", GPUDOCTOR_FAIL_ON="warning")
    assert node.srun("true").returncode != 0
    reason = node.wait_state("drained")
    assert reason.startswith("gpudoctor GD502: GPU 0 (NVIDIA A100-SXM4-80GB) has 12 GiB held"), reason


def test_action_log_only_logs(node, tmp_path):
    node.configure(GPUDOCTOR_ARGS=f"--snapshot {BAD_MACHINE}", GPUDOCTOR_ACTION="log")
    assert node.srun("true").returncode == 0
    assert node.wait_state("idle") == "none"  # after "completing"
    assert "would drain: gpudoctor GD503" in node.last_job()


def _stub(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize("case", ["missing", "usage-error", "doctor-bug", "timeout"])
def test_a_gpudoctor_failure_never_drains_the_node(node, tmp_path, case):
    """Exit 2/3, a missing gpudoctor or a hung check: logged, the node stays up and the job runs. (The exit-3 and
    hang cases use a stub command standing in for a broken gpudoctor install: they test the prolog's policy.)"""
    if case == "missing":
        settings, expected = {"GPUDOCTOR": str(tmp_path / "no-such-gpudoctor")}, "gpudoctor not found"
    elif case == "usage-error":
        settings, expected = {"GPUDOCTOR_ARGS": f"--snapshot {tmp_path / 'missing.json'}"}, "usage error (exit 2"
    elif case == "doctor-bug":
        settings = {"GPUDOCTOR": str(_stub(tmp_path, "gd-bug", "echo 'gpudoctor: internal error' >&2; exit 3"))}
        expected = "gpudoctor failed (exit 3, a gpudoctor bug)"
    else:
        settings = {"GPUDOCTOR": str(_stub(tmp_path, "gd-hang", "exec sleep 30")), "GPUDOCTOR_TIMEOUT": "1",
                    "GPUDOCTOR_TASK_TIMEOUT": "1"}
        expected = "check exceeded 1s"
    node.configure(**settings)
    marker = tmp_path / "ran"
    result = node.srun("touch", str(marker))
    assert result.returncode == 0, result.stderr + node.logs()
    assert marker.exists()
    assert node.wait_state("idle") == "none"  # after "completing"
    assert expected in node.last_job()


def test_taskprolog_exports_reach_every_task(node):
    result = node.srun("env", extra=["-n2", "--export=ALL,NCCL_DEBUG=INFO,CUDA_LAUNCH_BLOCKING=1"])
    assert result.returncode == 0, result.stderr + node.logs()
    lines = result.stdout.splitlines()
    assert lines.count("NCCL_DEBUG=WARN") == 2, result.stdout  # GD406's safe fix, in both tasks
    assert not [line for line in lines if line.startswith("NCCL_DEBUG=INFO")]
    assert not [line for line in lines if line.startswith("CUDA_LAUNCH_BLOCKING=")]  # GD409: unset
    # an unsafe fix (GD402 NCCL_ALGO=Ring,Tree for an invalid token) is never applied by the hook
    result = node.run("srun", "-N1", "-I10", "env", env=dict(node.env, NCCL_ALGO="Ring,NVLINK", NCCL_DEBUG="INFO"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "NCCL_ALGO=Ring,NVLINK" in lines and "NCCL_DEBUG=WARN" in lines, result.stdout


def test_taskprolog_prints_only_protocol_lines_and_survives_a_broken_gpudoctor(node, tmp_path):
    env = dict(node.env, NCCL_DEBUG="INFO", GPUDOCTOR_CONF=str(node.base / "gpudoctor.conf"))
    out = subprocess.run([str(TASKPROLOG)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["export NCCL_DEBUG=WARN"]
    node.configure(GPUDOCTOR=str(_stub(tmp_path, "gd", "echo 'export EVIL=1'; echo oops >&2; exit 3")))
    out = subprocess.run([str(TASKPROLOG)], env=env, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout) == (0, "")


def test_taskprolog_never_imports_the_jobs_torch(tmp_path):
    """The TaskProlog runs once per task: torch's and NCCL's versions come from package metadata (--quick). A torch
    whose import would leave a mark (and take 30 s) is read, never imported."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    marker = tmp_path / "imported"
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(30)\n")
    (package / "version.py").write_text("__version__ = '2.5.1+cu124'\ncuda = '12.4'\nhip = None\n")
    conf = tmp_path / "gpudoctor.conf"
    conf.write_text(f"GPUDOCTOR='{sys.executable} -m gpudoctor'\n")
    path = os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, NCCL_DEBUG="INFO", GPUDOCTOR_CONF=str(conf), PYTHONPATH=path)
    started = time.monotonic()
    out = subprocess.run([str(TASKPROLOG)], env=env, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.splitlines()) == (0, ["export NCCL_DEBUG=WARN"])
    assert not marker.exists(), "the TaskProlog imported torch"
    assert time.monotonic() - started < 25


def test_gd502_in_the_prolog_judges_the_gpus_slurm_gives_the_job(node, tmp_path):
    """A shared node simulated down to its NVML library (tests/nvmlsim): /dev/nvidia1 (NVML index 0) holds another
    job's 20 GiB, /dev/nvidia0 (NVML index 1) is free. slurmd gives the first job GPU 0 (SLURM_JOB_GPUS=0, and
    CUDA_VISIBLE_DEVICES=0 in the Prolog): it runs, since the busy GPU is not its own (read as a CUDA index, 0 would
    name the busy one). A job that gets both GPUs is refused with GD502."""
    import nvmlsim

    gpus = [{"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-5ba7ed00-0000-4000-8000-00000000000{minor}", "cc": "8.0",
             "minor": minor, "memory": {"total": 80 << 30, "reserved": 0, "used": 0},
             "processes": [{"pid": 4242, "used_bytes": 20 << 30}] if minor == 1 else []} for minor in (1, 0)]
    env = nvmlsim.node_env({"gpus": gpus}, tmp_path, base={})
    command = (f"env PYTHONPATH={ROOT} LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']} "
               f"FAKE_NVML_SPEC={env['FAKE_NVML_SPEC']} {sys.executable} -m gpudoctor")
    node.configure(GPUDOCTOR=command, GPUDOCTOR_SELECT="GD502", GPUDOCTOR_FAIL_ON="warning")
    result = node.srun("true", extra=["--gres=gpu:1"])
    assert result.returncode == 0, result.stderr + node.logs()
    line = node.last_job()
    assert " ok (" in line, line
    report = json.loads((node.logdir / f"job-{line.split('job=')[1].split()[0]}.json").read_text())
    assert report["summary"]["passed"] == 1 and {p["name"]: p["status"] for p in report["probes"]}["nvml"] == "ok"
    assert node.srun("true", extra=["--gres=gpu:2"]).returncode != 0
    reason = node.wait_state("drained")
    assert reason.startswith("gpudoctor GD502: GPU 0 (NVIDIA A100-SXM4-80GB) has 20 GiB held"), reason


def test_the_prolog_on_a_node_whose_cgroup_hides_a_gpu(node, tmp_path):
    """The simulated node's NVML lets the job open /dev/nvidia0 only (NVML index 0; index 1 answers NO_PERMISSION,
    as under ConstrainDevices). A job given one GPU runs: the hidden GPU is neither broken nor missing. A job
    given both GPUs gets one it cannot open: drained with GD506's count, from SLURM_JOB_GPUS: the Prolog's own
    environment, recorded here, has the job's GPU IDs and no SLURM_GPUS_ON_NODE (that is the job step's)."""
    import nvmlsim

    gpus = [{"name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-5ba7ed00-0000-4000-8000-00000000000{minor}", "cc": "8.0",
             "minor": minor, "memory": {"total": 80 << 30, "reserved": 0, "used": 0},
             **({"handle_error": "no_permission"} if minor == 1 else {})} for minor in (0, 1)]
    env = nvmlsim.node_env({"gpus": gpus}, tmp_path, base={})
    wrapper = tmp_path / "gpudoctor"  # the Prolog and the TaskProlog both run it: each writes its own env file
    wrapper.write_text(f"#!/bin/sh\nenv > {tmp_path}/env.$SLURM_SCRIPT_CONTEXT\nexec env PYTHONPATH={ROOT} "
                       f"LD_LIBRARY_PATH={env['LD_LIBRARY_PATH']} FAKE_NVML_SPEC={env['FAKE_NVML_SPEC']} "
                       f"{sys.executable} -m gpudoctor \"$@\"\n")
    wrapper.chmod(0o755)
    node.configure(GPUDOCTOR=str(wrapper))
    result = node.srun("true", extra=["--gres=gpu:1"])
    assert result.returncode == 0, result.stderr + node.logs()
    assert " ok (" in node.last_job(), node.last_job()
    prolog_env = (tmp_path / "env.prolog_slurmd").read_text().splitlines()
    assert "SLURM_JOB_GPUS=0" in prolog_env and not any(v.startswith("SLURM_GPUS_ON_NODE=") for v in prolog_env)
    assert node.srun("true", extra=["--gres=gpu:2"]).returncode != 0
    reason = node.wait_state("drained")
    assert reason.startswith("gpudoctor GD506: SLURM allocated 2 GPUs on this node (SLURM_JOB_GPUS=0,1) but NVML "
                             "sees 1"), reason


def _processes_with(marker):
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_check_past_the_prolog_timeout_leaves_no_probe_behind(node, tmp_path):
    """The Prolog's `timeout` sends SIGTERM to gpudoctor while a probe hangs (here the job's interpreter, a stand-in
    that never answers): gpudoctor ends its probes' process groups before it exits, so nothing is left running
    under PID 1 on the node, and the job is allowed as for any check past its time limit."""
    marker = f"hangs-{os.getpid()}-{time.monotonic_ns()}"
    python = _stub(tmp_path, f"python-{marker}", "while :; do sleep 1; done")
    node.configure(GPUDOCTOR_SELECT="GD108", GPUDOCTOR_ARGS=f"--python {python}", GPUDOCTOR_TIMEOUT="3",
                   GPUDOCTOR_PROBE_TIMEOUT="120")
    try:
        result = node.srun("true")
        assert result.returncode == 0, result.stderr + node.logs()
        assert "check exceeded 3s" in node.last_job()
        deadline = time.monotonic() + 10
        while _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _processes_with(marker) == [], "a probe outlived the gpudoctor the Prolog terminated"
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_preflight_under_srun(node, tmp_path):
    """`srun -n2 gpudoctor preflight` on the real single-node SLURM: srun's own variables place both ranks on this
    node (SLURM_STEP_NODELIST through `scontrol show hostnames`, SLURM_STEP_TASKS_PER_NODE), rank 0 holds the store,
    and one report names the node by its host."""
    pytest.importorskip("torch.distributed")
    env = dict(node.env, MASTER_PORT=str(_free_port()), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = node.run("srun", "-N1", "-n2", "-I10", f"--chdir={tmp_path}", sys.executable, "-m", "gpudoctor",
                      "preflight", "--format", "json", "--quick", "--budget", "40", env=env, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:] + node.logs()
    report = json.loads(result.stdout)  # one document: rank 1 printed nothing
    assert report["launcher"] == "slurm" and report["ok"] is True
    assert report["nodes"] == [{"node": node.node, "host": node.node, "node_rank": 0, "ranks": [0, 1],
                                "arrived": [0, 1]}]
    assert [(p["name"], p["status"]) for p in report["phases"]] == [
        ("meet", "ok"), ("agree", "ok"), ("gpus", "ok"), ("fabric", "ok")]
    (within,) = report["fabric"]["intra"]
    assert within["node"] == node.node and within["wrong"] == 0 and within["busbw_gbps"] > 0
    assert report["fabric"]["cross"] is None and report["fabric"]["pairs"] == []
