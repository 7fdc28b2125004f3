"""GD901–GD903: what a Kubernetes GPU pod asks for, from `facts["launch"]["pods"]` (gpudoctor.readers.k8s.pods). The
fixes show the YAML to add. GD904: a pod's one process on several GPUs, from the pod's job (`facts["launch"]["jobs"]`)
and the script it starts."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.jobs import gpus_of, gpus_text, job_label, jobs, names, pod_gpus, pods, script_of, where
from gpudoctor.model import Location, Severity


def _name(pod: dict) -> str:
    context = pod.get("context", "")
    return context.split(" ", 2)[1] if context.startswith("container ") else "trainer"


def _scripts_of(facts, pod: dict) -> list:
    """The analyses of the scripts the pod's container starts ([] when none was there to read)."""
    from gpudoctor.facts.jobs import jobs, script_of

    return [script for job in jobs(facts) if job.get("path") == pod.get("path")
            and job.get("context") == pod.get("context") for script in [script_of(facts, job)] if script]


def _shm_users(facts, pod: dict, gpus) -> tuple:
    """What in this pod would use /dev/shm, and whether that is known: the worker processes its scripts start
    (DataLoader workers, mp.spawn …) and, with several GPUs, NCCL's shared-memory transport between them."""
    scripts = _scripts_of(facts, pod)
    starts = [(script["path"], start) for script in scripts for start in script.get("process_starts") or []]
    users = [f"the worker processes of {path}:{start.get('line')} ({start.get('what')})"
             for path, start in starts[:2]]
    if gpus != 1:
        users.append("NCCL's shared-memory transport between the pod's GPUs")
    if not scripts:
        users.append("DataLoader workers or other worker processes, if the job starts any,")
    return users, bool(scripts) or gpus != 1


@check("GD901")
def k8s_gpu_pod_no_shm(facts, rule):
    for pod in pods(facts):
        gpus = pod_gpus(pod)
        if not gpus or pod.get("host_ipc") or (pod.get("shm") or {}).get("memory"):
            continue
        users, known = _shm_users(facts, pod, gpus)
        if not users:
            continue  # one GPU and a script that starts no worker process: nothing there needs /dev/shm
        shm = pod.get("shm")
        said = (f"/dev/shm is the volume {shm.get('volume')!r} (line {shm.get('line')}), which is not "
                f"`medium: Memory`" if shm else "/dev/shm is not mounted")
        yield rule.finding(
            f"{pod['context']} asks for {gpus} GPU(s) ({(pod.get('gpus') or {}).get('what')}) but {said} and the "
            f"pod is not hostIPC: the container runtime's default /dev/shm is 64 MiB, and {' and '.join(users)} "
            f"fail with \"Bus error\" or \"No space left on device\"",
            severity=None if known else Severity.INFO, location=Location(pod.get("path", "?"), pod.get("line")),
            evidence={"container": pod.get("context"), "gpus": gpus, "shm": shm, "host_ipc": False,
                      "users": users},
            fix=rule.fix(values={"container": _name(pod)},
                         docs="https://kubernetes.io/docs/concepts/storage/volumes/#emptydir"))


@check("GD902")
def k8s_efa_env_without_device(facts, rule):
    for pod in pods(facts):
        settings = pod.get("efa_env") or []
        if not settings or pod.get("efa"):
            continue
        said = ", ".join(f"{s['name']}={s['value']} (line {s['line']})" for s in settings[:3])
        gpus = pod_gpus(pod) or 8
        yield rule.finding(
            f"{pod['context']} configures EFA ({said}) but requests no vpc.amazonaws.com/efa: the EFA device plugin "
            f"mounts no EFA device into the pod, libfabric finds no provider and NCCL falls back to TCP sockets "
            f"(NET/Socket), many times slower across nodes" + (" (or fails to start with FI_PROVIDER=efa forced)"
                                                                 if any(s["name"] == "FI_PROVIDER" for s in settings)
                                                                 else ""),
            location=Location(pod.get("path", "?"), settings[0].get("line")),
            evidence={"container": pod.get("context"), "efa_env": settings, "efa": 0},
            fix=rule.fix(values={"gpus": gpus},
                         docs="https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html"))


@check("GD903")
def k8s_rdma_no_memlock(facts, rule):
    for pod in pods(facts):
        rdma = pod.get("rdma") or []
        if not rdma or pod.get("ipc_lock"):
            continue
        yield rule.finding(
            f"{pod['context']} uses RDMA devices ({', '.join(rdma)}) without IPC_LOCK: RDMA registers (pins) "
            f"memory, which the default memlock limit (64 KiB, 8 MiB on newer kernels) refuses "
            f"(\"Cannot allocate memory\" at ibv_reg_mr / fi_mr_reg). Many EKS node images raise the container "
            f"runtime's limit (Bottlerocket does when an EFA device is attached), which is why EKS EFA examples "
            f"often omit it: check `ulimit -l` in the pod",
            location=Location(pod.get("path", "?"), pod.get("line")),
            evidence={"container": pod.get("context"), "rdma": rdma, "ipc_lock": False},
            fix=rule.fix())



# --- GD904 k8s-one-process-many-gpus --------------------------------------------------------------------------

SPREADS_ITSELF = {"deepspeed", "lightning", "accelerate", "vllm", "nemo", "nemo_run", "megatron"}  # start or spread


def _one_gpu_script(script: dict, features: dict) -> bool:
    """The script drives one GPU: it starts no torch.distributed, no ranks, no DataParallel or Trainer (GD604,
    GD605, GD606 say those), uses no framework that starts or spreads processes itself, and places nothing on
    several GPUs (gpudoctor.readers.python.devices)."""
    return not (features.get("init") or features.get("spawns") or features.get("data_parallel")
                or features.get("hf_trainer") or features.get("several_devices")
                or set(script.get("frameworks") or ()) & SPREADS_ITSELF)


@check("GD904")
def k8s_one_process_many_gpus(facts, rule):
    undecided, found = [], False
    for job in jobs(facts):
        gpus = gpus_of(job)
        if job.get("kind") != "k8s" or not isinstance(gpus, int) or gpus < 2 or job.get("ranks_per_node") != 1 \
                or not set(names(job)) <= {"python", "training-operator"}:
            continue  # a launcher that starts a process per GPU, or a pod of one GPU
        script = script_of(facts, job)
        module = str((job.get("script") or {}).get("module") or "")
        if script is None and module.split(".")[0] in SPREADS_ITSELF:
            continue  # `python -m nemo.collections.llm…`: the framework starts its own processes
        if script is None:
            undecided.append(f"{job_label(job)}: its script was not among the files read")
            continue
        if not _one_gpu_script(script, script.get("launch") or {}):
            continue
        found = True
        yield rule.finding(
            f"{job_label(job)} starts one process in a pod that gets {gpus} GPUs ({gpus_text(job)}), and "
            f"{script['path']} drives one GPU (no torch.distributed, DataParallel, mp.spawn, device_map or second "
            f"device): it trains on one GPU while {gpus - 1} stay idle",
            location=where(job), evidence={"job": job.get("path"), "line": job.get("line"), "gpus": gpus,
                                          "script": script["path"]},
            fix=rule.fix(values={"gpus": gpus, "script": (job.get("script") or {}).get("path") or script["path"]}))
    if undecided and not found:  # whether those scripts use the other GPUs is not known: never a pass
        raise MissingFact("scripts", "; ".join(undecided[:3]))
