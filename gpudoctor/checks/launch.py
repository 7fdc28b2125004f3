"""GD604–GD608: the launch model (`facts["launch"]`, from the job files, gpudoctor.readers.launch) against what the
training script does (`facts["scripts"][*]["launch"]`, gpudoctor.readers.python.distributed). Without job files or
scripts these rules pass silently: there is nothing to compare."""

from __future__ import annotations

from typing import Optional, Tuple, Union

from gpudoctor.checks import check
from gpudoctor.facts import MissingFact
from gpudoctor.facts.jobs import (
    command_words,
    gpus_of,
    gpus_text,
    job_label,
    jobs,
    jobs_with_scripts,
    names,
    script_of,
    scripts,
    where,
)
from gpudoctor.facts.srun_command import per_node, shell_word
from gpudoctor.model import Location, Severity

TORCH_INIT = {"init_process_group", "DistributedDataParallel", "FullyShardedDataParallel", "fully_shard"}
RANK_STARTERS = {"srun", "mpirun", "torchrun", "torch.distributed.launch", "deepspeed", "accelerate",
                 "training-operator"}


def launcher_fix(job: dict, gpus: Optional[int]) -> Tuple[str, ...]:
    """The command(s) that start the job's script with a launcher: once per node under srun in a batch script."""
    if job.get("kind") == "sbatch":
        return per_node(job, gpus)
    script = job.get("script") or {}
    return (" ".join([f"torchrun --nproc_per_node={gpus if gpus else 'NUM_GPUS'}", script.get("path") or "train.py",
                      *map(shell_word, script.get("args") or [])]),)





# --- GD604 distributed-script-without-launcher -------------------------------------------------------------

@check("GD604")
def distributed_script_without_launcher(facts, rule):
    found_any = False
    for job, script, features in jobs_with_scripts(facts):
        if features.get("spawns") or any(i.get("kind", "").startswith("Lightning") for i in features.get("init", [])):
            continue  # the script (or Lightning) starts its own ranks
        found = _trainer_alone(job, script, features) or _env_init_alone(job, script, features)
        if found:
            message, severity, evidence = found
            found_any = True
            yield rule.finding(message, severity=severity, location=where(job), evidence=evidence,
                               fix=rule.fix(commands=launcher_fix(job, evidence["gpus"])))
    unread = [job for job in jobs(facts) if script_of(facts, job) is None and not job.get("sets_rank_env")
              and job.get("kind") != "nemo_run"]  # an executor starts its task itself: no script to start plainly
    if unread and not found_any:  # whether that script initialises torch.distributed is not known: never a pass
        script = unread[0].get("script") or {}
        what = script.get("path") or (f"module {script['module']}" if script.get("module") else "a script")
        where_run = ", in a folder the job files do not say (`cd` to a value set at run time)" \
            if script.get("folder_unknown") else ""
        raise MissingFact("scripts", f"{job_label(unread[0])} starts {what}{where_run}, which was not among the "
                                     "files read")


def _trainer_alone(job: dict, script: dict, features: dict) -> Optional[tuple]:
    """(message, severity, evidence) of the Hugging Face Trainer with DeepSpeed or FSDP under plain python."""
    trainer = features.get("hf_trainer")
    engine = trainer and plain_python(job) and trainer_engine(job, trainer)
    gpus = gpus_of(job)
    if not trainer or not engine or (gpus is not None and gpus <= 1):
        return None
    on = f"{gpus} GPUs ({gpus_text(job)})" if gpus else "the node's GPUs"
    return (f"{job_label(job)} starts the Hugging Face Trainer with {engine} ({script['path']}:"
            f"{trainer['line']}) as one plain python process: no launcher sets RANK/WORLD_SIZE/LOCAL_RANK, so "
            f"{engine} runs a world of one process on one GPU and shards nothing across {on}", Severity.WARNING,
            {"job": job.get("path"), "line": job.get("line"), "engine": engine, "gpus": gpus,
             "script": script["path"], "init_line": trainer["line"]})


def _env_init_alone(job: dict, script: dict, features: dict) -> Optional[tuple]:
    """(message, severity, evidence) of a script that initialises torch.distributed (or DeepSpeed, Accelerate)
    from the environment, started where nothing sets RANK/WORLD_SIZE."""
    inits = [i for i in features.get("init", []) if i.get("kind") in TORCH_INIT]
    others = [i for i in features.get("init", []) if i.get("kind", "").startswith(("deepspeed", "Accelerator"))]
    if any(i.get("sets_rank") and i.get("init_method") not in (None, "env://") for i in inits):
        return None  # rank and world size given explicitly with a tcp:// or file:// rendezvous
    if job.get("sets_rank_env") or not (inits or others):
        return None
    first = (inits or others)[0]
    said = f"{script['path']}:{first['line']} `{first['what']}`"
    launchers = set(names(job))
    found = _env_init_message(job, launchers, inits, said, features)
    if found is None:
        return None
    return found + ({"job": job.get("path"), "line": job.get("line"), "launchers": sorted(launchers),
                     "gpus": gpus_of(job), "script": script["path"], "init_line": first["line"]},)


def _env_init_message(job: dict, launchers: set, inits: list, said: str, features: dict) -> Optional[tuple]:
    """(message, severity) by how the job starts the script: srun/mpirun, plain python on several GPUs, or on one."""
    gpus = gpus_of(job)
    env_ranks = {"RANK", "WORLD_SIZE"} <= set(job.get("env_sets") or [])
    if launchers & {"srun", "mpirun"}:
        if not inits or features.get("reads_rank_env") or env_ranks:
            return None
        starter = "srun" if "srun" in launchers else "mpirun"
        return (f"{job_label(job)} starts {job.get('ranks_what')} rank(s) per node with {starter}, which sets "
                f"{'SLURM_PROCID' if starter == 'srun' else 'OMPI_COMM_WORLD_RANK'}, not RANK/WORLD_SIZE, and "
                f"the script initialises torch.distributed from the environment ({said}): every rank stops "
                f"with \"environment variable RANK expected, but not set\""), None
    if gpus is not None and gpus > 1:
        return (f"{job_label(job)} starts one process with plain python on a node with {gpus} GPUs "
                f"({gpus_text(job)}), but the script is written for one process per GPU ({said}): "
                + ("nothing sets RANK/WORLD_SIZE, so it stops with \"environment variable RANK expected, "
                   f"but not set\" (and one process would use one GPU while {gpus - 1} stay idle)" if inits
                   else f"it trains on one GPU while {gpus - 1} stay idle")), None if inits else Severity.WARNING
    if inits and not env_ranks and job.get("kind") in ("sbatch", "shell", "compose", "k8s"):
        return (f"{job_label(job)} starts the script with plain python and nothing sets RANK/WORLD_SIZE, "
                f"but the script initialises torch.distributed from the environment ({said}): it stops with "
                f"\"environment variable RANK expected, but not set\""), None
    return None


# --- GD605 dataparallel-multi-gpu ----------------------------------------------------------------------------

@check("GD605")
def dataparallel_multi_gpu(facts, rule):
    """One finding per script (the first wrap on several GPUs, else the first), naming the other wraps' lines."""
    run_by: dict = {}
    reported = set()
    for job, script, _ in jobs_with_scripts(facts):
        run_by.setdefault(script["path"], []).append(job)
    for script in scripts(facts):
        counts = [n for n in (gpus_of(job) for job in run_by.get(script["path"], [])) if n is not None]
        wraps = _data_parallel_wraps(script, counts)
        if not wraps:
            continue
        reported.add(script["path"])
        _, _, call, ids, several = min(wraps, key=lambda wrap: wrap[:2])
        others = sorted({c.get("line") for _, _, c, _, _ in wraps if c is not call and c.get("line")})
        also = f" (the script wraps models in DataParallel again at line(s) {', '.join(map(str, others))})" \
            if others else ""
        yield rule.finding(
            f"`{call['what']}` runs {_data_parallel_on(counts, ids)} in one process{also}: nn.DataParallel "
            f"copies the model to every GPU at each step and is bound by Python's GIL; PyTorch recommends "
            f"DistributedDataParallel, one process per GPU, even on one node",
            severity=None if several else Severity.INFO,
            location=Location(script["path"], call.get("line")),
            evidence={"script": script["path"], "line": call.get("line"), "device_ids": ids,
                      "gpus": max(counts) if counts else None, "other_lines": others},
            fix=rule.fix(values={"script": script["path"]},
                         commands=("torchrun --nproc_per_node=NUM_GPUS " + script["path"],),
                         docs="https://pytorch.org/tutorials/intermediate/ddp_tutorial.html"))
    yield from trainer_data_parallel(facts, rule, reported)


def _data_parallel_wraps(script: dict, counts: list) -> list:
    """(on one GPU, order, call, device_ids, on several GPUs) of each DataParallel wrap that may run on several
    GPUs: all of them, unless every job that runs the script gives it one GPU (DataParallel does nothing there)."""
    wraps: list = []
    for call in (script.get("launch") or {}).get("data_parallel", []) or []:
        ids = call.get("device_ids")
        several = (isinstance(ids, list) and len(ids) > 1) or any(count > 1 for count in counts)
        if counts and not several:
            continue
        wraps.append((not several, len(wraps), call, ids, several))
    return wraps


def _data_parallel_on(counts: list, ids) -> str:
    """Where the wrap runs, in words: on the jobs' GPUs, on the devices it names, or on every visible GPU."""
    if counts and max(counts) > 1:
        return f"on {max(counts)} GPUs"
    return f"on devices {ids}" if isinstance(ids, list) and len(ids) > 1 else "on every visible GPU"


def plain_python(job: dict) -> bool:
    """One process started without a launcher that sets LOCAL_RANK (`python train.py`, `srun python …` one task)."""
    launchers = names(job)
    return bool(launchers) and launchers[-1] == "python" and not set(launchers) & (RANK_STARTERS - {"srun"}) \
        and job.get("ranks_per_node") in (1, None) and "LOCAL_RANK" not in (job.get("env_sets") or [])


def trainer_engine(job: dict, trainer: dict) -> Optional[str]:
    """"DeepSpeed" / "FSDP" when the Trainer is given one, in TrainingArguments or on the job's command line."""
    words = command_words(job)
    for flag, engine in (("deepspeed", "DeepSpeed"), ("fsdp", "FSDP")):
        passed = ([f"--{flag}"] if trainer.get("command_line") else []) + (trainer.get(f"{flag}_options") or [])
        if trainer.get(flag) or any(w in passed or w.startswith(tuple(f"{o}=" for o in passed)) for w in words):
            return engine
    return None


HF_DEVICES = ("transformers' TrainingArguments._setup_devices sets n_gpu = torch.cuda.device_count() when no launcher "
              "set LOCAL_RANK, and Trainer._wrap_model wraps the model in torch.nn.DataParallel when n_gpu > 1")


def trainer_data_parallel(facts, rule, reported: set):
    """The Hugging Face Trainer started as one plain process on several GPUs: DataParallel, not DDP."""
    for job, script, features in jobs_with_scripts(facts):
        trainer = features.get("hf_trainer")
        if not trainer or script["path"] in reported or not plain_python(job) or trainer_engine(job, trainer):
            continue
        gpus = gpus_of(job)
        if gpus is not None and gpus <= 1:
            continue
        reported.add(script["path"])
        on = f"on {gpus} GPUs ({gpus_text(job)})" if gpus else "on every visible GPU"
        yield rule.finding(
            f"{job_label(job)} starts the Hugging Face Trainer ({script['path']}:{trainer['line']} "
            f"`{trainer['what']}`) as one process {on}: {HF_DEVICES} — one process driving every GPU, not "
            "DistributedDataParallel",
            severity=None if gpus else Severity.INFO, location=where(job),
            evidence={"script": script["path"], "line": trainer["line"], "gpus": gpus, "trainer": trainer},
            fix=rule.fix(case="trainer", values={"script": script["path"]}, commands=launcher_fix(job, gpus)))


def starts_own_ranks(facts, job: dict, unknown_too: bool) -> bool:
    """Whether the script a job runs with python starts its own ranks (mp.spawn, Lightning, NeMo): then the
    launchers' count is not the job's. `unknown_too`: say so when the script could not be read."""
    script = script_of(facts, job)
    if script is None:
        return unknown_too
    features = script.get("launch") or {}
    return bool(features.get("spawns")) or any(i.get("kind", "").startswith("Lightning")
                                               for i in features.get("init", []))


def distributed(facts, job: dict) -> bool:
    """Whether the script a job starts is known to use torch.distributed, DeepSpeed, accelerate or Lightning."""
    script = script_of(facts, job)
    return bool(script and (script.get("launch") or {}).get("init"))


# --- GD606 ranks-gpus-mismatch --------------------------------------------------------------------------------

@check("GD606")
def ranks_gpus_mismatch(facts, rule):
    undecided, reported = [], False
    for job in jobs(facts):
        counts = _ranks_against_gpus(facts, job)
        if isinstance(counts, str):
            undecided.append(f"{job_label(job)}: {counts}")
            continue
        if counts is None:
            continue
        ranks, gpus = counts
        more = ranks > gpus
        message = (f"{job_label(job)} starts {ranks} rank(s) per node ({job.get('ranks_what')}) but the node gets "
                   f"{gpus} GPU(s): {gpus_text(job)}; "
                   + (f"{ranks - gpus} rank(s) share a GPU or fail with \"invalid device ordinal\" (NCCL refuses "
                      f"two ranks on one GPU: \"Duplicate GPU detected\")" if more else
                      f"{gpus - ranks} GPU(s) stay idle"))
        yield rule.finding(message, severity=None if more else Severity.WARNING, location=where(job),
                           evidence={"job": job.get("path"), "line": job.get("line"), "ranks_per_node": ranks,
                                     "ranks": job.get("ranks_what"), "gpus": gpus,
                                     "gpus_line": (job.get("gpus") or {}).get("line")},
                           fix=_ranks_fix(rule, job, ranks, gpus))
        reported = True
    if undecided and not reported:  # a count the files leave to the run: not a match
        raise MissingFact("launch.jobs", "; ".join(undecided[:3]))


def _ranks_against_gpus(facts, job: dict) -> Union[None, str, Tuple[int, int]]:
    """A job's (ranks, GPUs) per node where they differ; why they are not known (a sentence); None where there is
    nothing to compare (no launcher, a match, a script that starts its own ranks, a one-process step)."""
    launchers = names(job)
    if not set(launchers) & RANK_STARTERS and not any(n.startswith("nemo_run") for n in launchers):
        return None  # a plain python process: GD604/GD605 say what matters there
    ranks, gpus = job.get("ranks_per_node"), gpus_of(job)
    if ranks == "gpu" or gpus == 0 or isinstance(ranks, int) and ranks == gpus:
        return None
    if not isinstance(ranks, int):
        return f"its ranks per node are not known ({job.get('ranks_what')})"
    if gpus is None:
        return "the job files do not say how many GPUs a node gets"
    if launchers[-1] == "python" and starts_own_ranks(facts, job, False):
        return None
    if set(launchers) == {"training-operator", "python"} and script_of(facts, job) is None:
        path = (job.get("script") or {}).get("path") or "its script"
        return (f"one process per pod on {gpus} GPU(s); whether {path} starts its own ranks (mp.spawn) is not "
                "known: it was not among the files read")
    if ranks < gpus and launchers[-1] == "python" and not distributed(facts, job):
        return None  # `srun python preprocess.py`: a one-process step, not a training job missing ranks
    return ranks, gpus


def _ranks_fix(rule, job: dict, ranks: int, gpus: int):
    """The fix in the words of what starts the ranks: NeMo-Run, a launcher under srun, torchrun, deepspeed,
    accelerate, mpirun, a pod, or srun's tasks."""
    launchers = names(job)
    launcher = next((e.get("name") for e in job.get("launchers", [])
                     if e.get("name") in ("torchrun", "deepspeed", "accelerate")), None)
    counts = {"gpus": gpus, "ranks": ranks}
    tasks = next((e.get("ranks_per_node") for e in job.get("launchers", []) if e.get("name") == "srun"), None)
    if job.get("kind") == "nemo_run":
        return rule.fix(case="nemo_run", values=counts)
    if launcher and isinstance(tasks, int) and tasks > 1:
        return rule.fix(case="srun_launcher", values={"tasks": tasks, "ranks": ranks})
    if launcher == "torchrun" or job.get("kind") == "compose":
        return rule.fix(values=counts)
    if launcher in ("deepspeed", "accelerate"):
        return rule.fix(case="deepspeed" if launcher == "deepspeed" else "accelerate", values=counts)
    if "mpirun" in launchers and "srun" not in launchers:
        return rule.fix(case="mpirun", values=counts)
    if job.get("kind") == "k8s":
        return rule.fix(case="pod", values=dict(counts, script=(job.get("script") or {}).get("path") or "train.py"))
    return rule.fix(case="tasks", values=counts)


# --- GD607 cuda-visible-devices-overwritten ---------------------------------------------------------------------

@check("GD607")
def cuda_visible_devices_overwritten(facts, rule):
    for job, script, features in jobs_with_scripts(facts):
        ranks = job.get("ranks_per_node")
        if not (ranks == "gpu" or isinstance(ranks, int) and ranks > 1):
            continue
        for item in features.get("sets_visible_devices", []) or []:
            source = "a constant" if item.get("source") == "constant" else "a command-line argument"
            yield rule.finding(
                f"`{item['what']}` sets CUDA_VISIBLE_DEVICES from {source} while "
                f"{job_label(job)} starts {ranks if ranks != 'gpu' else 'one per GPU'} ranks per node "
                f"({job.get('ranks_what')}): every rank sees the same devices, so with LOCAL_RANK > 0 they "
                f"collide on one GPU or fail with \"invalid device ordinal\"",
                location=Location(script["path"], item.get("line")),
                evidence={"script": script["path"], "line": item.get("line"), "job": job.get("path"),
                          "job_line": job.get("line"), "ranks_per_node": ranks},
                fix=rule.fix())


# --- GD608 nemo-run-env-ignored ----------------------------------------------------------------------------------

@check("GD608")
def nemo_run_env_ignored(facts, rule):
    for script in scripts(facts):
        for item in (script.get("launch") or {}).get("nemo_env_ignored", []) or []:
            how = "direct=True" if item.get("direct") else "no executor"
            yield rule.finding(
                f"`{item['what']}` runs in this process ({how}), so the env_vars "
                f"given to {item['executor']} at line {item['executor_line']} are never applied: the job runs "
                f"with this shell's environment",
                location=Location(script["path"], item.get("line")),
                evidence={"script": script["path"], "line": item.get("line"), "executor": item.get("executor"),
                          "executor_line": item.get("executor_line")},
                fix=rule.fix())


# --- GD610 multi-node-without-srun --------------------------------------------------------------------------------

REMOTE_STARTERS = {"srun", "mpirun", "deepspeed"}  # start processes on the other nodes (deepspeed: over pdsh/ssh)
NODE_LAUNCHERS = {"torchrun", "torch.distributed.launch", "accelerate"}


def _started_remotely_too(facts, job: dict) -> bool:
    """Another command of the same file starts the same script with srun/mpirun (`torchrun … --node_rank=0 &` here,
    `srun -w node2 torchrun … --node_rank=1` for the other node)."""
    script = (job.get("script") or {}).get("path")
    return any(other is not job and other.get("path") == job.get("path") and set(names(other)) & REMOTE_STARTERS
               and (other.get("script") or {}).get("path") == script for other in jobs(facts))


@check("GD610")
def multi_node_without_srun(facts, rule):
    for job in jobs(facts):
        nodes = (job.get("nodes") or {}).get("count")
        if job.get("kind") != "sbatch" or not isinstance(nodes, int) or nodes < 2 \
                or set(names(job)) & REMOTE_STARTERS or _started_remotely_too(facts, job):
            continue
        waits = next((entry for entry in job.get("launchers", []) if (entry.get("nodes") or {}).get("count", 1) > 1),
                     None)
        if waits is None and not (set(names(job)) & NODE_LAUNCHERS or distributed(facts, job)):
            continue  # `python prepare_data.py` before the srun step: one process is what it wants
        said = f"{job['nodes']['what']} at {job.get('path')}:{job['nodes'].get('line')}"
        if waits is not None:
            message = (f"{job_label(job)} runs only on the first node of the allocation ({said}): the batch script "
                       f"itself runs there once, and nothing (srun) starts it on the other {nodes - 1}. "
                       f"{waits['name']} waits at its rendezvous for {waits['nodes']['count']} nodes "
                       f"({waits['nodes']['what']}), and the others never join: the job hangs until the rendezvous "
                       f"times out")
            severity = None
        else:
            message = (f"{job_label(job)} runs only on the first node of the allocation ({said}): the batch script "
                       f"itself runs there once, and nothing (srun) starts it on the other {nodes - 1}, which stay "
                       f"idle for the whole job")
            severity = Severity.WARNING
        yield rule.finding(message, severity=severity, location=where(job),
                           evidence={"job": job.get("path"), "line": job.get("line"), "nodes": nodes,
                                     "launchers": names(job), "waits_for": (waits or {}).get("nodes")},
                           fix=rule.fix(commands=launcher_fix(job, gpus_of(job))))


# --- GD611 launcher-runs-interpreter ----------------------------------------------------------------------------

@check("GD611")
def launcher_runs_interpreter(facts, rule):
    for job in jobs(facts):
        script = job.get("script") or {}
        launcher = (job.get("launchers") or [{}])[-1].get("name")
        if not script.get("interpreter") or launcher == "python":
            continue
        command = job.get("command", "")
        yield rule.finding(
            f"{job_label(job)}: {launcher} runs its script argument with Python itself (`python -u SCRIPT …`), so "
            f"`{script.get('path')}` is taken as the script: every rank stops with \"can't open file "
            f"'…/{script.get('path')}': [Errno 2] No such file or directory\"",
            location=where(job),
            evidence={"job": job.get("path"), "line": job.get("line"), "launcher": launcher,
                      "script": script.get("path")},
            fix=rule.fix(values={"launcher": launcher, "interpreter": script.get("path")},
                         commands=(_without_interpreter(command, script.get("path")),) if command else ()))


def _without_interpreter(command: str, interpreter: Optional[str]) -> str:
    """The command with the interpreter word after the launcher's options removed (its first occurrence there)."""
    words = command.split(" ")
    positions = [i for i, word in enumerate(words) if word == interpreter]
    return " ".join(words[:positions[-1]] + words[positions[-1] + 1:]) if positions else command


# --- GD613 multi-node-loopback-rendezvous -----------------------------------------------------------------------

def loopback(host: str) -> bool:
    return host.lower() in ("localhost", "::1", "0.0.0.0", "ip6-localhost") or host.startswith("127.")


@check("GD613")
def multi_node_loopback_rendezvous(facts, rule):
    for job in jobs(facts):
        for entry in job.get("launchers", []):
            nodes, meet = (entry.get("nodes") or {}).get("count", 1), entry.get("rendezvous") or {}
            if nodes < 2 or not loopback(meet.get("host", "")) or entry.get("node_rank") is not None:
                continue  # one node, a real address, or one node's own copy of the command (a literal node rank:
                # node 0's, whose peers name its address, or several "nodes" tried out on one host)
            yield rule.finding(
                f"{job_label(job)}: {entry['name']} meets its {nodes} nodes ({entry['nodes']['what']}) at "
                f"{meet['what']}, a loopback address: run on every node, each node's {entry['name']} waits at "
                f"its own address, so the nodes never meet and the job hangs until the rendezvous times out",
                location=Location(job.get("path", "?"), meet.get("line") or job.get("line")),
                evidence={"job": job.get("path"), "line": job.get("line"), "launcher": entry["name"],
                          "nodes": nodes, "rendezvous": meet.get("what"), "node_rank": entry.get("node_rank")},
                fix=rule.fix(values={"launcher": entry["name"]}))
