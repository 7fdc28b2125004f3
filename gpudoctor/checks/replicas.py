"""GD617: the replicas of a Kubernetes PyTorchJob against its Master, from `facts["launch"]["pods"]`
(gpudoctor.readers.k8s.pods): a Worker that runs no command or gets no GPU hangs the job in rendezvous."""

from __future__ import annotations

from gpudoctor.checks import check
from gpudoctor.facts.jobs import jobs, pod_gpus, pods
from gpudoctor.model import Location


def _job_of(context: str) -> str:
    """`PyTorchJob llama (Worker)` of a container's context, without the role: the replicas of one job."""
    label = context.split(" of ", 1)[-1]
    return label.rsplit(" (", 1)[0]


@check("GD617")
def k8s_worker_replica_incomplete(facts, rule):
    by_job: dict = {}
    for pod in pods(facts):
        if pod.get("kind") == "PyTorchJob" and pod.get("role") in ("Master", "Worker"):
            by_job.setdefault((pod.get("path"), _job_of(str(pod.get("context")))), []).append(pod)
    for (path, label), replicas in by_job.items():
        master = next((p for p in replicas if p["role"] == "Master" and p.get("runs_command")), None)
        if master is None:
            continue
        command = next((j.get("command") for j in jobs(facts) if j.get("context") == master.get("context")), None)
        for worker in (p for p in replicas if p["role"] == "Worker"):
            gaps = []
            if not worker.get("runs_command"):
                gaps.append(f"runs no command of its own (the image's default entrypoint of {worker.get('image')})")
            if pod_gpus(master) and not pod_gpus(worker):
                gaps.append("requests no nvidia.com/gpu (the pod gets no GPU)")
            if not gaps:
                continue
            runs = f"`{command}`" if command else "its command"
            yield rule.finding(
                f"{label}: the Worker replica {' and '.join(gaps)}, while the Master runs {runs} on "
                f"{pod_gpus(master) or 'its'} GPU(s); YAML copies nothing from the Master (a comment such as \"same as "
                f"Master\" included). The operator counts every replica in WORLD_SIZE, so the Master's "
                "init_process_group waits for a rank that never joins and the job hangs in rendezvous until its "
                "timeout (or the Worker starts and finds no CUDA device)",
                location=Location(str(path), worker.get("line")),
                evidence={"job": label, "master": master.get("context"), "worker": worker.get("context"),
                          "worker_runs_command": bool(worker.get("runs_command")), "worker_gpus": pod_gpus(worker),
                          "master_gpus": pod_gpus(master)},
                fix=rule.fix(values={"job": label}))
