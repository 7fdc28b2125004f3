"""The launch model (gpudoctor.readers) and GD411, GD604–GD608, GD901–GD903: command lines, SLURM counts, Kubernetes
pods, and job files in the shapes of real public ones (fixtures/launch/README.md) through the reader, the engine and
the CLI — including correct jobs that must stay free of errors."""

import json

import pytest
from conftest import FIXTURES, ROOT, cli_in_process

from gpudoctor.catalog import load_catalog
from gpudoctor.engine import evaluate
from gpudoctor.readers import commands
from gpudoctor.readers.registry import read_file
from gpudoctor.readers.shell import slurm
from gpudoctor.readers.shell.jobs import read_script
from gpudoctor.snapshot import Snapshot

LAUNCH = FIXTURES / "launch"
K8S = LAUNCH / "k8s"
LINT_RULES = [rule for rule in load_catalog() if not rule.host]
JOB_RULES = {"GD411", "GD604", "GD605", "GD606", "GD607", "GD608", "GD609", "GD610", "GD611", "GD613", "GD614",
             "GD615", "GD616", "GD617", "GD901", "GD902", "GD903"}


def words(line: str):
    return [(word, not word.startswith("$")) for word in line.split()]


def chain(line: str):
    parsed = commands.parse(words(line), 1)
    return parsed and [(e["name"], e.get("ranks_per_node")) for e in parsed["launchers"]], parsed and parsed["script"]


# --- command lines -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,launchers,script", [
    ("python train.py --lr 1e-4", [("python", 1)], "train.py"),
    ("python3 -u -W ignore train.py", [("python", 1)], "train.py"),
    ("torchrun --nproc_per_node 8 train.py", [("torchrun", 8)], "train.py"),
    ("torchrun --nproc-per-node=4 --nnodes 2 --standalone train.py", [("torchrun", 4)], "train.py"),
    ("torchrun --nnodes=2 train.py", [("torchrun", 1)], "train.py"),  # torchrun's default is 1
    ("torchrun --nproc_per_node=gpu train.py", [("torchrun", "gpu")], "train.py"),
    ("torchrun --nproc_per_node $NGPUS train.py", [("torchrun", None)], "train.py"),
    ("python -m torch.distributed.run --nproc_per_node 2 train.py", [("torchrun", 2)], "train.py"),
    ("python -m torch.distributed.launch --use_env --nproc_per_node=2 train.py",
     [("torch.distributed.launch", 2)], "train.py"),
    ("deepspeed --num_gpus 4 train.py --deepspeed ds.json", [("deepspeed", 4)], "train.py"),
    ("deepspeed train.py", [("deepspeed", "gpu")], "train.py"),
    ("accelerate launch --multi_gpu --num_processes 8 train.py", [("accelerate", 8)], "train.py"),
    ("accelerate launch --num_processes 16 --num_machines 2 train.py", [("accelerate", 8)], "train.py"),
    # --num_processes counts every machine: over a run-time number of machines, the count per node is unknown
    ("accelerate launch --num_processes 8 --num_machines $SLURM_NNODES train.py", [("accelerate", None)], "train.py"),
    ("srun --ntasks-per-node=8 python train.py", [("srun", None), ("python", 1)], "train.py"),
    ("srun -n 8 -N 8 --gpus-per-task=8 torchrun --nproc_per_node 8 train.py",
     [("srun", None), ("torchrun", 8)], "train.py"),
    ("mpirun -np 16 -npernode 8 -x NCCL_DEBUG=WARN --mca btl tcp,self python train.py",
     [("mpirun", 8), ("python", 1)], "train.py"),
    ("exec nohup env OMP_NUM_THREADS=8 numactl --interleave=all python train.py",
     [("python", 1)], "train.py"),
    # a profiler or environment manager whose options take values or not (jamesafranke/ViT_clouds run/exec_run_v2.bash)
    ("nsys profile --trace=cuda,nvtx --force-overwrite true -o rep torchrun --nproc_per_node=4 train.py",
     [("torchrun", 4)], "train.py"),
    ("conda run -n train --no-capture-output python train.py", [("python", 1)], "train.py"),
    # Cray PALS mpiexec on ALCF Polaris (oumi-ai/oumi scripts/polaris/jobs) and Cray ALPS aprun
    # (argonne-lcf/dlio_ml_workloads cosmoflow job-scripts)
    ("mpiexec --np 8 --ppn 4 --depth 16 --cpu-bind depth --env OMP_NUM_THREADS=1 python train.py",
     [("mpirun", 4), ("python", 1)], "train.py"),
    ("aprun -n 512 -N 4 -d 8 -cc depth python train.py configs/test_polaris.yaml", [("mpirun", 4), ("python", 1)],
     "train.py"),
    # srun's --label is a flag, --kill-on-bad-exit takes its value only after `=`
    ("srun --label --kill-on-bad-exit python -u train.py", [("srun", None), ("python", 1)], "train.py"),
    ("apptainer exec --nv image.sif torchrun --nproc_per_node 4 train.py", [("torchrun", 4)], "train.py"),
])
def test_command_lines(line, launchers, script):
    found, target = chain(line)
    assert found == launchers
    assert target["path"] == script


@pytest.mark.parametrize("line", ["echo done", "nvidia-smi -L", "python -c 'import torch'", "$LAUNCHER train.py",
                                  "bash run.sh", ""])
def test_commands_that_start_no_script(line):
    assert commands.parse(words(line), 1) is None


# --- SLURM ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("directives,srun,tasks", [
    ({}, {}, 1),  # one task per node by default
    ({"--ntasks-per-node": ("4", 3, True)}, {}, 4),
    ({"--nodes": ("2", 2, True), "--ntasks": ("16", 3, True)}, {}, 8),
    ({"--nodes": ("2", 2, True), "--ntasks": ("3", 3, True)}, {}, None),
    ({"--ntasks-per-node": ("4", 3, True)}, {"--ntasks-per-node": "1"}, 1),  # srun's own option wins
    ({}, {"--ntasks-per-node": "$SLURM_GPUS_ON_NODE"}, None),
])
def test_tasks_per_node(directives, srun, tasks):
    assert slurm.tasks_per_node(srun, directives)[0] == tasks


@pytest.mark.parametrize("option,value,tasks,count", [
    ("--gres", "gpu:4", 1, 4), ("--gres", "gpu:a100:8", 1, 8), ("--gres", "gpu", 1, 1),
    ("--gres", "nvme:1,gpu:h100:2", 1, 2), ("--gpus-per-node", "h100:8", 1, 8), ("--gpus-per-node", "4", 1, 4),
    ("--gpus-per-task", "1", 8, 8), ("--gres", "gpu:$N", 1, None),
])
def test_gpus_per_node(option, value, tasks, count):
    gpus = slurm.gpus_per_node({}, {option: (value, 4, "$" not in value)}, tasks, None)
    assert gpus["count"] == count and gpus["line"] == 4


def test_gpus_for_the_whole_job_need_the_node_count():
    assert slurm.gpus_per_node({}, {"--gpus": ("16", 3, True), "--nodes": ("2", 2, True)}, 1, None)["count"] == 8
    assert slurm.gpus_per_node({}, {"--gpus": ("16", 3, True)}, 1, None)["count"] is None


def test_directives_stop_at_the_first_command():
    text = ("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gres=gpu:4 --ntasks-per-node 4\necho hi\n#SBATCH --gres=gpu:8\n"
            "srun python train.py\n")
    _, (job,) = read_script(text, "job.sbatch")
    assert job["kind"] == "sbatch" and job["nodes"] == {"count": 2, "line": 2, "what": "#SBATCH --nodes=2"}
    assert (job["gpus"]["count"], job["gpus"]["line"]) == (4, 3)
    assert job["launchers"][0]["ranks_per_node"] == 4
    assert [entry["line"] for entry in job["ignored_directives"]] == [5]


# --- jobs and verdicts -----------------------------------------------------------------------------------------

def lint(*paths):
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    for path in paths:
        read_file(path, snapshot)
    return snapshot, evaluate(snapshot, LINT_RULES)


def gd606(report):
    """The severity of GD606's one finding, None where it has none."""
    found = [str(f.severity) for f in report.findings if f.rule == "GD606"]
    assert len(found) <= 1, found
    return found[0] if found else None


def written_job(tmp_path, name: str, text: str):
    """The one job of a job file written from `text`, and the report of linting it."""
    (tmp_path / name).write_text(text)
    return one_job(tmp_path / name)


def one_job(path):
    """The one job a job file starts, and the report of linting it."""
    snapshot, report = lint(path)
    (job,) = snapshot.facts["launch"]["jobs"]
    return job, report


def job_findings(tmp_path, name: str, body: str, rule: str) -> list:
    """The findings of one rule on a job file written from `body`."""
    job = tmp_path / name
    job.write_text(body)
    _, report = lint(job)
    return [f for f in report.findings if f.rule == rule]


def verdict(report) -> set:
    return {(f.rule, str(f.severity), f.location.path.rsplit("/", 1)[-1], f.location.line)
            for f in report.findings if f.rule in JOB_RULES}


EXPECTED = [
    (["ddp_plain_python.sbatch"], {("GD604", "error", "ddp_plain_python.sbatch", 11)}),
    (["torchrun_more_ranks_than_gpus.sbatch"], {("GD606", "error", "torchrun_more_ranks_than_gpus.sbatch", 9)}),
    (["clean_torchrun.sbatch"], set()),
    (["run_cvd.sh"], {("GD607", "error", "train_cvd.py", 11)}),
    # the same, parsed in the script's own helper function: the value is followed through it
    (["run_cvd_helper.sh"], {("GD607", "error", "train_cvd_helper.py", 18)}),
    (["run_cvd_helper_rank.sh"], set()),
    # the global rank as the device: an error on two nodes, nothing on the one node it was written for
    (["global_rank_2nodes.sbatch"], {("GD616", "error", "train_global_rank.py", 12)}),
    (["global_rank_1node.sh"], set()),
    # the Hugging Face Trainer: plain python on several GPUs is DataParallel; DeepSpeed there is one process
    (["hf_plain_python.sh"], {("GD605", "warning", "hf_plain_python.sh", 3)}),
    (["hf_deepspeed_plain.sbatch"], {("GD604", "warning", "hf_deepspeed_plain.sbatch", 7)}),
    (["hf_torchrun.sh"], set()),
    (["nemo_pretrain.py"], {("GD608", "warning", "nemo_pretrain.py", 14)}),
    (["launch_local_rank.sh"], {("GD609", "warning", "launch_local_rank.sh", 3)}),
    # deepspeed.initialize(args=args) sets args.local_rank from LOCAL_RANK: fine unless the script uses it first
    (["ds_torchrun.sh"], set()),
    (["ds_torchrun_set_device.sh"], {("GD609", "warning", "ds_torchrun_set_device.sh", 2)}),
    # the script applies the executor's env_vars itself before the direct run: nothing is lost
    (["nemo_env_applied.py"], set()),
    (["nemo_slurm_launcher.py"], {("GD606", "error", "nemo_slurm_launcher.py", 7)}),
    (["nemo_factory_direct.py"], {("GD608", "warning", "nemo_factory_direct.py", 14)}),
    # the user's own fix of seed 000: CUDA_VISIBLE_DEVICES in the executor's env_vars, then a direct run
    (["../scripts/seed_000_nemo_single_gpu_fixed.py"], {("GD608", "warning", "seed_000_nemo_single_gpu_fixed.py",
                                                         21)}),
    (["nccl_tuned.sbatch"], {("GD411", "warning", "nccl_tuned.sbatch", 8),
                             ("GD411", "warning", "nccl_tuned.sbatch", 9)}),
    (["k8s/pytorchjob_efa_env_no_device.yaml"], {
        ("GD606", "error", "pytorchjob_efa_env_no_device.yaml", 30),
        ("GD901", "warning", "pytorchjob_efa_env_no_device.yaml", 19),
        ("GD902", "error", "pytorchjob_efa_env_no_device.yaml", 23)}),
    (["k8s/eks_efa_pytorchjob.yaml"], {("GD903", "info", "eks_efa_pytorchjob.yaml", 23)}),
    # next to FI_PROVIDER=efa only NCCL_PROTO=Simple is AWS's own setting: the other knobs are still reported
    (["k8s/eks_efa_nccl_pinned.yaml"], {("GD903", "info", "eks_efa_nccl_pinned.yaml", 23),
                                        ("GD411", "warning", "eks_efa_nccl_pinned.yaml", 30),
                                        ("GD411", "warning", "eks_efa_nccl_pinned.yaml", 34),
                                        ("GD411", "warning", "eks_efa_nccl_pinned.yaml", 36)}),
    (["k8s/mpijob_efa.yaml"], set()),
    (["k8s/jobset_torchrun.yaml"], set()),
    (["k8s/job_dataparallel.yaml"], {("GD605", "warning", "dp_train.py", 8),
                                     ("GD901", "warning", "job_dataparallel.yaml", 11)}),
    # one GPU: /dev/shm matters only for the worker processes the script starts
    (["k8s/convert_job.yaml"], set()),
    (["k8s/finetune_1gpu_job.yaml"], {("GD901", "warning", "finetune_1gpu_job.yaml", 11)}),
    # the Worker copies nothing from the Master: no command, no GPU; the Master is one process on 8 GPUs
    (["k8s/pytorchjob_worker_incomplete.yaml"], {("GD617", "error", "pytorchjob_worker_incomplete.yaml", 35),
                                                 ("GD606", "warning", "pytorchjob_worker_incomplete.yaml", 18)}),
    (["k8s/dp_train.py"], {("GD605", "info", "dp_train.py", 8)}),
]


@pytest.mark.parametrize("names,expected", EXPECTED, ids=[e[0][0] for e in EXPECTED])
def test_fixture_verdicts(names, expected):
    _, report = lint(*[LAUNCH / name for name in names])
    assert verdict(report) == expected
    assert not [f for f in report.findings if "crashed" in f.message]


def test_gd605_is_one_finding_per_script_led_by_a_wrap_on_several_gpus(tmp_path):
    script = tmp_path / "gan.py"
    script.write_text("import torch.nn as nn\n\n\ndef main(ngpu):\n    g = nn.DataParallel(nn.Linear(2, 2))\n"
                      "    d = nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])\n    e = nn.DataParallel(g)\n\n\n"
                      "if __name__ == '__main__':\n    main(2)\n")
    _, report = lint(script)
    [finding] = [f for f in report.findings if f.rule == "GD605"]
    assert (str(finding.severity), finding.location.line, finding.evidence["other_lines"]) == ("warning", 6, [5, 7])
    assert "again at line(s) 5, 7" in finding.message


def test_correct_jobs_have_no_error():
    for name in ("clean_torchrun.sbatch", "k8s/eks_efa_pytorchjob.yaml", "k8s/mpijob_efa.yaml",
                 "k8s/jobset_torchrun.yaml"):
        _, report = lint(LAUNCH / name)
        assert not [f for f in report.findings if str(f.severity) != "info"], (name, report.findings)


def test_every_value_has_its_file_and_line():
    snapshot, _ = lint(LAUNCH / "torchrun_more_ranks_than_gpus.sbatch")
    (job,) = snapshot.facts["launch"]["jobs"]
    assert job["line"] == 9 and job["gpus"]["line"] == 5 and job["gpus"]["what"] == "#SBATCH --gres=gpu:a100:4"
    assert [(e["name"], e["ranks_per_node"]) for e in job["launchers"]] == [("srun", 1), ("torchrun", 8)]
    assert job["launchers"][0]["source"] == "#SBATCH --ntasks-per-node=1"
    assert job["launchers"][1]["line"] == 11  # `--nproc_per_node 8` is on the command's third line
    assert job["script"] == {"path": "train_ddp.py", "line": 9, "analysed_as": str(LAUNCH / "train_ddp.py"),
                             "args": [], "args_known": True}


# PBS Pro and LSF batch scripts (NCAR Derecho-style `select=…:ngpus=4`, Summit-style `#BSUB -gpu "num=…"`)
@pytest.mark.parametrize("directive,gpus,severity", [
    ("#PBS -l select=1:ncpus=64:ngpus=4", 4, "error"),
    ("#PBS -l select=2:ncpus=64:ngpus=8\n#PBS -l place=scatter", 8, None),
    ("#PBS -l select=2:ncpus=64:ngpus=8", None, None),  # two chunks may share a node: unknown
    ('#BSUB -gpu "num=4:mode=exclusive_process"', 4, "error"),
])
def test_pbs_and_lsf_directives_give_the_gpus_of_a_node(tmp_path, directive, gpus, severity):
    job, report = written_job(tmp_path, "job.sh", f"#!/bin/bash\n{directive}\nmodule load conda\n"
                                                  "torchrun --nproc_per_node=8 train.py\n")
    assert job["gpus"]["count"] == gpus and gd606(report) == severity


def test_pals_mpiexec_env_reaches_the_ranks():
    env, _ = read_script("mpiexec -n 8 --ppn 4 --env NCCL_DEBUG=INFO --envall python train.py\n", "run.sh")
    (item,) = env.assignments
    assert (item.name, item.value, item.context) == ("NCCL_DEBUG", "INFO", "passed by `--env`")


def test_run_dependent_values_stay_unknown(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --gres=gpu:8\nNGPU=$(cat ngpus.txt)\n"
                   "torchrun --nproc_per_node $NGPU train.py\n"
                   "srun --ntasks-per-node=$SLURM_GPUS_ON_NODE python train.py\n")
    snapshot, report = lint(job)
    first, second = snapshot.facts["launch"]["jobs"]
    assert first["ranks_per_node"] is None and first["launchers"][0]["unresolved"] == "$NGPU"
    assert second["ranks_per_node"] is None
    assert not [f for f in report.findings if f.rule == "GD606"]


@pytest.mark.parametrize("count", ["$SLURM_GPUS_ON_NODE", "${SLURM_GPUS_ON_NODE}", "$NGPU",
                                   "$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)",
                                   "$(python -c 'import torch; print(torch.cuda.device_count())')"])
def test_a_count_that_is_the_nodes_gpus_is_one_rank_per_gpu(tmp_path, count):
    """`torchrun --nproc_per_node=$SLURM_GPUS_ON_NODE` (or the lines of `nvidia-smi -L`) starts one rank per GPU
    whatever the node has; srun's tasks still multiply it."""
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:4\n"
                   f"NGPU=$(nvidia-smi -L | wc -l)\nsrun torchrun --nproc_per_node={count} train.py\n")
    snapshot, report = lint(job)
    assert snapshot.facts["launch"]["jobs"][0]["ranks_per_node"] == "gpu" and "GD606" in report.passed
    job.write_text(job.read_text().replace("--ntasks-per-node=1", "--ntasks-per-node=4"))
    snapshot, report = lint(job)
    assert snapshot.facts["launch"]["jobs"][0]["ranks_per_node"] is None and "GD606" not in report.passed


def test_srun_repeating_the_allocations_own_counts_inherits_them(tmp_path):
    """`srun --ntasks-per-node=$SLURM_NTASKS_PER_NODE python -u train.py` under `#SBATCH --ntasks-per-node=1`."""
    job, report = written_job(tmp_path, "train.sh", "#!/bin/bash\n#SBATCH --gres=gpu:1\n#SBATCH --nodes=4\n"
                                                    "#SBATCH --ntasks-per-node=1\nexport RANK=$SLURM_PROCID\n"
                                                    "srun --ntasks-per-node=$SLURM_NTASKS_PER_NODE "
                                                    "--nodes=${SLURM_NNODES} python -u train.py\n")
    assert job["launchers"][0]["ranks_per_node"] == 1 and job["launchers"][0]["source"] == "#SBATCH --ntasks-per-node=1"
    assert "GD606" in report.passed


def test_a_script_given_twice_is_analysed_once():
    snapshot, report = lint(LAUNCH / "ddp_plain_python.sbatch", LAUNCH / "train_ddp.py")
    assert len(snapshot.facts["scripts"]) == 1
    assert [f.rule for f in report.findings if f.rule == "GD604"] == ["GD604"]


def test_srun_without_torchrun_needs_the_script_to_map_slurm_ranks(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --ntasks-per-node=4\n#SBATCH --gres=gpu:4\nsrun python train.py\n")
    (tmp_path / "train.py").write_text((LAUNCH / "train_ddp.py").read_text())
    _, report = lint(job)
    (finding,) = [f for f in report.findings if f.rule == "GD604"]
    assert "SLURM_PROCID, not RANK/WORLD_SIZE" in finding.message and finding.location.line == 4
    (tmp_path / "train.py").write_text((LAUNCH / "train_slurm.py").read_text())
    _, report = lint(job)
    assert not [f for f in report.findings if f.rule in ("GD604", "GD606")]


def test_nested_bash_c_under_srun(tmp_path):
    job_fact, report = written_job(tmp_path, "job.sbatch",
                                   '#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:4\n'
                                   'srun bash -c "torchrun --nnodes=2 --nproc_per_node=8 train.py"\n')
    assert [e["name"] for e in job_fact["launchers"]] == ["srun", "torchrun"] and job_fact["ranks_per_node"] == 8
    assert gd606(report) == "error"


# the launcher kept in variables and started as `srun $CMD` (huggingface/accelerate examples/slurm/submit_multinode.sh)
LAUNCHER_IN_VARIABLES = ('#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:4\n'
                         'head_node_ip=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)\n'
                         'export LAUNCHER="accelerate launch \\\n    --num_processes {procs} \\\n'
                         '    --num_machines 2 --main_process_ip $head_node_ip \\\n    "\n'
                         'export SCRIPT="train.py"\nexport CMD="$LAUNCHER $SCRIPT --mixed_precision fp16"\nsrun $CMD\n')


@pytest.mark.parametrize("procs,severity", [(8, None), (16, "error")])
def test_a_launcher_kept_in_variables_is_read(tmp_path, procs, severity):
    job_fact, report = written_job(tmp_path, "job.sbatch", LAUNCHER_IN_VARIABLES.format(procs=procs))
    assert [e["name"] for e in job_fact["launchers"]] == ["srun", "accelerate"]
    assert job_fact["script"]["path"] == "train.py" and job_fact["script"]["args"] == ["--mixed_precision", "fp16"]
    assert "rendezvous" not in job_fact["launchers"][1]  # `$head_node_ip`: known only at run time
    assert gd606(report) == severity
    assert ("GD606" in report.passed) == (severity is None)


def test_a_command_string_run_by_sh_c_is_read(tmp_path):
    """`srun … sh -c "${CMD}"` (NVIDIA/Megatron-LM examples/academic_paper_scripts/sc21/SRUN.sh)."""
    job = tmp_path / "SRUN.sh"
    job.write_text('#!/bin/bash\n#SBATCH --ntasks-per-node=8 --gres=gpu:8\n'
                   'CMD="python -u ${CODE_DIR}/pretrain_gpt.py ${PARAMS}"\n'
                   'srun -l --container-image "nvcr.io#nvidia/pytorch:20.12-py3" sh -c "${CMD}"\n')
    snapshot, _ = lint(job)
    (job_fact,) = snapshot.facts["launch"]["jobs"]
    assert [e["name"] for e in job_fact["launchers"]] == ["srun", "python"] and job_fact["ranks_per_node"] == 8
    assert job_fact["script"]["unresolved"] == "${CODE_DIR}/pretrain_gpt.py"


def test_a_variable_that_extends_itself_keeps_its_earlier_value(tmp_path):
    job, _ = written_job(tmp_path, "run.sh", 'DIST="--nnodes=$SLURM_NNODES"\nDIST="$DIST --nproc_per_node=4"\n'
                                             "N=2\nOPTS=\"--n $N\"\nN=3\ntorchrun $DIST train.py $OPTS\n")
    assert job["ranks_per_node"] == 4 and job["script"]["path"] == "train.py"
    assert job["script"]["args"] == ["--n", "2"]  # the value N had when OPTS was set


# torchrun's options kept in a bash array (NVIDIA/Megatron-LM examples/gpt3/train_gpt3_175b_distributed.sh)
ARRAY_OPTIONS = ("#!/bin/bash\n#SBATCH --gres=gpu:{gpus}\nGPUS_PER_NODE=8\nDISTRIBUTED_ARGS=(\n"
                 "    --nproc_per_node $GPUS_PER_NODE \n    --nnodes 1\n)\n"
                 "GPT_ARGS=(\n    --tensor-model-parallel-size 8\n)\n"
                 "torchrun ${{DISTRIBUTED_ARGS[@]}} pretrain_gpt.py ${{GPT_ARGS[@]}}\n")


@pytest.mark.parametrize("gpus,severity", [(8, None), (4, "error")])
def test_launcher_options_in_a_bash_array_are_read(tmp_path, gpus, severity):
    job_fact, report = written_job(tmp_path, "train.sbatch", ARRAY_OPTIONS.format(gpus=gpus))
    assert job_fact["ranks_per_node"] == 8 and job_fact["launchers"][0]["nodes"]["count"] == 1
    assert job_fact["script"]["path"] == "pretrain_gpt.py"
    assert job_fact["script"]["args"] == ["--tensor-model-parallel-size", "8"]
    assert gd606(report) == severity


@pytest.mark.parametrize("body,unresolved", [
    # an array set in a file the script sources: it may hold --nproc_per_node, so torchrun's default of 1 is not known
    ("source args.sh\ntorchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py\n", "${DISTRIBUTED_ARGS[@]}"),
    # pytorch/torchtitan run_train.sh: a default the caller overrides (`NGPU=32 ./run_train.sh`), its quotes the shell's
    ('NGPU=${NGPU:-"8"}\ntorchrun --nproc_per_node=${NGPU} -m torchtitan.train\n', "${NGPU}"),
])
def test_a_count_the_caller_or_another_file_sets_is_unknown(tmp_path, body, unresolved):
    job_fact, report = written_job(tmp_path, "run.sbatch", "#!/bin/bash\n#SBATCH --gres=gpu:8\n" + body)
    assert job_fact["ranks_per_node"] is None and job_fact["launchers"][0]["unresolved"] == unresolved
    assert [u.rule for u in report.unknown if u.rule == "GD606"] == ["GD606"]


# `accelerate launch --config_file` (hiyouga/LLaMA-Factory examples/extras/fsdp_qlora/train.sh and
# examples/accelerate/fsdp_config.yaml): num_processes counts every machine
@pytest.mark.parametrize("config,ranks,severity", [
    ("distributed_type: FSDP\nnum_machines: 1\nnum_processes: 2  # the number of GPUs in all nodes\n", 2, None),
    ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 2\nnum_processes: 8\n", 4,
     "error"),
    ("distributed_type: 'NO'\nnum_processes: 1\n", 1, "warning"),
])
def test_accelerate_reads_the_processes_of_its_config_file(tmp_path, config, ranks, severity):
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "fsdp_config.yaml").write_text(config)
    job_fact, report = written_job(tmp_path, "train.sh", "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 accelerate launch \\\n"
                   "    --config_file configs/fsdp_config.yaml \\\n    src/train.py sft.yaml\n")
    assert job_fact["ranks_per_node"] == ranks and "in configs/fsdp_config.yaml" in job_fact["ranks_what"]
    assert gd606(report) == severity


def test_accelerate_without_its_config_file_or_with_the_count_on_the_command_line(tmp_path):
    job = tmp_path / "train.sh"
    job.write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 accelerate launch --config_file cfg.yaml train.py\n")
    _, report = lint(job)  # the config is not there: unknown
    assert [u.rule for u in report.unknown if u.rule == "GD606"] == ["GD606"]
    (tmp_path / "cfg.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 8\n")
    job.write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 accelerate launch --config_file cfg.yaml "
                   "--num_processes 2 train.py\n")
    snapshot, report = lint(job)
    assert snapshot.facts["launch"]["jobs"][0]["ranks_per_node"] == 2 and "GD606" in report.passed


@pytest.mark.parametrize("hostfile,ranks", [("worker-0 slots=8\nworker-1 slots=8\n", 8),
                                             ("# two nodes\nworker-0 slots=4\nworker-1 slots=4\n", 4),
                                             ("worker-0 slots=8\nworker-1 slots=4\n", None)])
def test_deepspeed_reads_the_slots_of_its_hostfile(tmp_path, hostfile, ranks):
    (tmp_path / "hostfile").write_text(hostfile)
    job = tmp_path / "train.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\n"
                   "deepspeed --hostfile=hostfile train.py --deepspeed ds.json\n")
    snapshot, report = lint(job)
    assert snapshot.facts["launch"]["jobs"][0]["ranks_per_node"] == ranks
    assert gd606(report) == ("warning" if ranks == 4 else None)


@pytest.mark.parametrize("processes,ranks", [("$((SLURM_NNODES * GPUS_PER_NODE))", 4), ("$(($SLURM_NNODES*8))", 8),
                                             ("$((SLURM_NNODES + 4))", None)])
def test_accelerate_processes_proportional_to_a_run_time_machine_count(tmp_path, processes, ranks):
    """`--num_processes $((SLURM_NNODES * GPUS_PER_NODE)) --num_machines $SLURM_NNODES` (huggingface/accelerate
    examples/slurm/submit_multinode.sh): GPUS_PER_NODE per machine however many machines the run gets."""
    job, _ = written_job(tmp_path, "job.sbatch", "#!/bin/bash\n#SBATCH --nodes=4\nexport GPUS_PER_NODE=4\n"
                                                 f"srun accelerate launch --num_processes {processes} "
                                                 "--num_machines $SLURM_NNODES train.py\n")
    assert job["ranks_per_node"] == ranks


def test_shell_arithmetic_of_known_values():
    env, _ = read_script("GPUS_PER_NODE=8\nNUM_NODES=2\nexport WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))\n"
                         "export HALF=$((WORLD_SIZE / 2 + 1))\nexport LATER=$((WORLD_SIZE * SLURM_NNODES))\n", "run.sh")
    got = {item.name: (item.value, item.unresolved) for item in env.assignments}
    assert got["WORLD_SIZE"] == ("16", None) and got["HALF"] == ("9", None)
    assert got["LATER"][1] and got["LATER"][0] == "$((16 * SLURM_NNODES))"


def test_ranks_that_depend_on_the_run_leave_gd606_unknown(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gres=gpu:4\n"
                   "srun accelerate launch --num_processes $((SLURM_NNODES * GPUS)) "
                   "--num_machines $SLURM_NNODES t.py\n")
    _, report = lint(job)
    (unknown,) = [u for u in report.unknown if u.rule == "GD606"]
    assert "ranks per node are not known (srun: 1" in unknown.reason and "GD606" not in report.passed
    job.write_text("#!/bin/bash\ntorchrun --nproc_per_node $N t.py\n")  # neither the ranks nor the GPUs known
    _, report = lint(job)
    assert [u.rule for u in report.unknown if u.rule == "GD606"] == ["GD606"] and "GD606" not in report.passed


# a batch script whose srun starts another shell script, which starts torchrun
# (He-Wenhao/ML-LinearSpace script/submit.sh and script/torchrun_script.sh)
@pytest.mark.parametrize("tasks,gpus,severity", [("4", "--gpus-per-task=1", "error"), ("1", "--gpus-per-node=4", None)])
def test_the_jobs_of_a_shell_script_srun_starts(tmp_path, tasks, gpus, severity):
    (tmp_path / "submit.sh").write_text(f"#!/bin/bash\n#SBATCH -N 5\n#SBATCH --ntasks-per-node={tasks}\n"
                                        f"#SBATCH {gpus}\nmodule load pytorch\n"
                                        "srun --nodes=5 bash torchrun_script.sh\n")
    (tmp_path / "torchrun_script.sh").write_text(
        "export MASTER_ADDR=$(scontrol show hostname ${SLURM_NODELIST} | head -n 1)\n"
        "torchrun --nnodes=5 --nproc_per_node=4 --rdzv_endpoint=$MASTER_ADDR:29400 train.py\n")
    job, report = one_job(tmp_path / "submit.sh")
    assert [e["name"] for e in job["launchers"]] == ["srun", "torchrun"] and job["gpus"]["count"] == 4
    assert job["path"].endswith("torchrun_script.sh") and "submit.sh:6" in job["context"]
    findings = [f for f in report.findings if f.rule == "GD606"]
    assert [str(f.severity) for f in findings] == ([severity] if severity else [])
    assert not findings or "give srun one task per node" in findings[0].fix.summary


def test_a_shell_script_that_is_not_there_starts_no_known_job(tmp_path):
    (tmp_path / "submit.sh").write_text("#!/bin/bash\n#SBATCH --gres=gpu:4\nsrun ./run.sh\nsource env.sh\n")
    snapshot, _ = lint(tmp_path / "submit.sh")
    assert not (snapshot.facts.get("launch") or {}).get("jobs")


def test_sh_with_options_before_c_under_srun(tmp_path):
    """`srun "$@" sh -xeuc '…'` (slitvinov/deepseek-slurm main2.sh)."""
    job = tmp_path / "main2.sh"
    job.write_text("master_addr=`srun \"$@\" hostname`\nsrun \"$@\" sh -xeuc '\n  torchrun --master-addr x \\\n"
                   "  --nnodes $SLURM_NNODES --node-rank $SLURM_NODEID --nproc-per-node gpu main1.py'\n")
    snapshot, _ = lint(job)
    (job_fact,) = snapshot.facts["launch"]["jobs"]
    assert [e["name"] for e in job_fact["launchers"]] == ["srun", "torchrun"] and job_fact["ranks_per_node"] == "gpu"
    assert job_fact["script"]["path"] == "main1.py"


def test_visible_devices_for_the_command_count_as_the_gpus(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 torchrun --nproc_per_node 4 train.py\n")
    _, report = lint(script)
    (finding,) = [f for f in report.findings if f.rule == "GD606"]
    assert "CUDA_VISIBLE_DEVICES=0,1" in finding.message and str(finding.severity) == "error"


@pytest.mark.parametrize("command,fix", [
    ("torchrun --nproc_per_node 4 train.py", "set torchrun's --nproc_per_node to 2 (or `--nproc_per_node=gpu`)"),
    ("deepspeed --num_gpus 4 train.py", "set the deepspeed launcher's --num_gpus to 2, or ask for 4 GPUs."),
])
def test_the_ranks_fix_names_the_launchers_own_option(tmp_path, command, fix):
    """deepspeed's launcher has no `--nproc_per_node=gpu`: its remedy is --num_gpus alone."""
    script = tmp_path / "run.sh"
    script.write_text(f"#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 {command}\n")
    _, report = lint(script)
    (finding,) = [f for f in report.findings if f.rule == "GD606"]
    assert fix in finding.fix.summary


def test_dockerfile_cmd_is_a_job(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text('FROM pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime AS base\nCMD ["python", "x.py"]\n'
                          'FROM base\nWORKDIR /app\nENTRYPOINT ["torchrun", "--nproc_per_node=8"]\n'
                          'CMD ["train.py", "--epochs", "3"]\n')
    snapshot, _ = lint(dockerfile)
    (job,) = snapshot.facts["launch"]["jobs"]
    assert job["line"] == 5 and job["ranks_per_node"] == 8 and job["script"]["path"] == "train.py"


def test_compose_service_with_gpus(tmp_path):
    compose = tmp_path / "compose.yaml"
    compose.write_text("services:\n  train:\n    image: trainer\n    command: torchrun --nproc_per_node 4 train.py\n"
                       "    deploy:\n      resources:\n        reservations:\n          devices:\n"
                       "            - driver: nvidia\n              count: 2\n              capabilities: [gpu]\n")
    _, report = lint(compose)
    assert [(f.rule, f.location.line) for f in report.findings if f.rule == "GD606"] == [("GD606", 4)]


# the GPU reservation kept in an `x-` anchor merged with `<<:` (a compose override template), or as device_ids
# (thr3a/docker-build-station cuda12.6-torch/README.md)
GPU_ANCHOR = ("x-common:\n  gpu: &gpu\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
              "            - driver: nvidia\n              {devices}\n              capabilities: [gpu]\n"
              "services:\n  train:\n    <<: *gpu\n    environment:\n      - NCCL_DEBUG=WARN\n"
              "    command: torchrun --nproc_per_node {ranks} train.py\n")


@pytest.mark.parametrize("devices,ranks,severity", [("count: 1", 2, "error"), ("count: 2", 2, None),
                                                    ("device_ids: ['0', '1']", 2, None),
                                                    ("device_ids: ['1']", 2, "error")])
def test_compose_gpus_from_a_merged_anchor_or_device_ids(tmp_path, devices, ranks, severity):
    job, report = written_job(tmp_path, "compose.yaml", GPU_ANCHOR.format(devices=devices, ranks=ranks))
    assert job["gpus"]["what"] == devices.replace("'", "")
    assert gd606(report) == severity


# an unrendered Helm chart template (the kubeflow-template chart's pytorch-job define) and a Jinja one
HELM_JOB = ('{{- define "kubeflow-template.pytorch-job" -}}\napiVersion: "kubeflow.org/v1"\nkind: PyTorchJob\n'
            "metadata:\n  name: {{ .Release.Name }}\n  labels:\n    {{- include \"chart.labels\" . | nindent 4 }}\n"
            "spec:\n  pytorchReplicaSpecs:\n    Master:\n      replicas: 1\n      template:\n        spec:\n"
            "          containers:\n            - name: pytorch\n              image: {{ .Values.master.image }}\n"
            "              env:\n                - name: NCCL_DEBUG\n                  value: {{ .Values.ncclDebug }}\n"
            "              resources:\n                limits:\n                  nvidia.com/gpu: {gpus}\n"
            "              command: [torchrun, --nproc_per_node=4, train.py]\n{% if roce %}\n{% endif %}\n"
            "{{- end }}\n")


@pytest.mark.parametrize("gpus,severity", [("{{ default 1 .Values.master.gpus }}", None), ("2", "error"),
                                           ("4", None)])
def test_a_chart_template_is_read_as_the_manifest_it_renders(tmp_path, gpus, severity):
    manifest = tmp_path / "pytorchjob.yaml"
    manifest.write_text(HELM_JOB.replace("{gpus}", gpus))
    snapshot, report = lint(manifest)
    (job,) = snapshot.facts["launch"]["jobs"]
    assert job["ranks_per_node"] == 4 and job["gpus"]["what"] == f"nvidia.com/gpu: {gpus}"
    assert not [f for f in report.findings if f.rule == "GD003"]
    assert gd606(report) == severity
    assert ("GD606" in [u.rule for u in report.unknown]) == ("{{" in gpus)
    assert snapshot.facts["env_sources"]["NCCL_DEBUG"]["unresolved"] == "Helm template expression"


def test_pytorchjob_plain_python_gets_ranks_from_the_operator(tmp_path):
    job, report = written_job(tmp_path, "job.yaml", (K8S / "pytorchjob_efa_env_no_device.yaml").read_text().replace(
        "- torchrun\n                - --nproc_per_node=8\n                - --nnodes=2\n", "- python\n"))
    (tmp_path / "train.py").write_text((LAUNCH / "train_ddp.py").read_text())
    assert [e["name"] for e in job["launchers"]] == ["training-operator", "python"] and job["sets_rank_env"]
    assert not [f for f in report.findings if f.rule == "GD604"]


def test_a_pod_with_idle_gpus_gets_a_kubernetes_fix_not_a_slurm_one(tmp_path):
    """A PyTorchJob runs one plain-python process per pod: the remedy is torchrun in the pod (or fewer GPUs), never
    srun's --ntasks-per-node."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata:\n  name: resnet\nspec:\n"
                        "  pytorchReplicaSpecs:\n    Worker:\n      replicas: 2\n      template:\n        spec:\n"
                        "          containers:\n            - name: pytorch\n              image: trainer:1\n"
                        "              command: [python3, /app/train.py]\n"
                        "              resources:\n                limits:\n                  nvidia.com/gpu: 4\n")
    (tmp_path / "train.py").write_text((LAUNCH / "train_ddp.py").read_text())
    _, report = lint(manifest)
    (finding,) = [f for f in report.findings if f.rule == "GD606"]
    assert str(finding.severity) == "warning" and "3 GPU(s) stay idle" in finding.message
    assert "torchrun --nproc_per_node=4 /app/train.py" in finding.fix.summary
    assert "nvidia.com/gpu: 1" in finding.fix.summary and "ntasks" not in finding.fix.summary


def test_mpirun_ranks_fix_names_npernode(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\nCUDA_VISIBLE_DEVICES=0,1 mpirun -np 8 -npernode 4 python train.py\n")
    _, report = lint(script)
    (finding,) = [f for f in report.findings if f.rule == "GD606"]
    assert "-npernode 2" in finding.fix.summary and "ntasks" not in finding.fix.summary


def test_gd404_does_not_rename_a_forced_tuning_value():
    """NCCL_MAX_NCHANNELS=8 is deprecated for NCCL_MAX_CTAS, but NCCL_MAX_CTAS=8 would pin the same choice."""
    snapshot = Snapshot(facts={"env": {}, "torch": {"nccl": "2.21.5"}})
    read_file(LAUNCH / "nccl_tuned.sbatch", snapshot)
    report = evaluate(snapshot, [r for r in LINT_RULES if r.id == "GD404"])
    (finding,) = report.findings
    assert finding.fix.env.set == {} and finding.fix.env.unset == ("NCCL_MAX_NCHANNELS",)
    assert "NCCL_MAX_CTAS" in finding.message and "do not rename it" in finding.message


def test_rules_are_pure_functions_of_the_snapshot(tmp_path):
    """The launch facts replay from a snapshot on a machine that has none of the files."""
    snapshot, report = lint(LAUNCH / "ddp_plain_python.sbatch", K8S / "pytorchjob_efa_env_no_device.yaml")
    recorded = tmp_path / "snap.json"
    recorded.write_text(json.dumps(snapshot.to_json() if hasattr(snapshot, "to_json") else
                                   {"schema": "gpudoctor.snapshot/1", "facts": snapshot.facts}))
    replayed = evaluate(Snapshot(facts=json.loads(json.dumps(snapshot.facts))), LINT_RULES)
    assert verdict(replayed) == verdict(report) and verdict(report)


# --- the command line ------------------------------------------------------------------------------------------

def cli(*args):
    """The command as a shell runs it from the checkout (120 columns, no NCCL_DEBUG), in this process."""
    done = cli_in_process(*args, env={"COLUMNS": "120", "NCCL_DEBUG": None})
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_lint_job_and_script_end_to_end():
    done = cli("lint", LAUNCH / "ddp_plain_python.sbatch", LAUNCH / "train_ddp.py", "--format", "json")
    assert done.returncode == 1
    (finding,) = [f for f in json.loads(done.stdout)["findings"] if f["rule"] == "GD604"]
    assert finding["location"]["line"] == 11 and finding["fix"]["commands"]
    assert "--nproc_per_node=8" in finding["fix"]["commands"][-1]


def test_lint_a_kubernetes_folder_end_to_end():
    done = cli("lint", K8S, "--format", "json")
    assert done.returncode == 1
    found = {(f["rule"], f["location"]["path"].rsplit("/", 1)[-1], f["location"]["line"])
             for f in json.loads(done.stdout)["findings"]}
    assert ("GD902", "pytorchjob_efa_env_no_device.yaml", 23) in found
    assert ("GD606", "pytorchjob_efa_env_no_device.yaml", 30) in found
    plain = cli("lint", K8S, "--format", "plain", "--no-color")
    assert "medium: Memory" in plain.stdout and "mountPath: /dev/shm" in plain.stdout  # the YAML to add
    assert "vpc.amazonaws.com/efa: 32" in plain.stdout


def test_check_snapshot_replays_the_launch_facts(tmp_path):
    recorded = tmp_path / "snap.json"
    snapshot, _ = lint(LAUNCH / "torchrun_more_ranks_than_gpus.sbatch")
    machine = json.loads((FIXTURES / "machines" / "h100x8-healthy.json").read_text())
    machine["facts"].update({k: v for k, v in snapshot.facts.items() if k in ("launch", "scripts")})
    recorded.write_text(json.dumps(machine))
    done = cli("check", "--snapshot", recorded, "--select", "GD606", "--format", "json")
    assert done.returncode == 1
    assert [f["rule"] for f in json.loads(done.stdout)["findings"]] == ["GD606"]


def test_site_policies_read_the_launch_model(tmp_path):
    policy = tmp_path / "site.toml"
    policy.write_text('[[rule]]\nid = "SITE101"\nseverity = "error"\n'
                      'message = "a job asks for {launch.jobs[*].gpus.count} GPUs per node; the nodes have 4"\n'
                      'require = { fact = "launch.jobs[*].gpus.count", op = "le", value = 4, quantifier = "all" }\n')
    done = cli("lint", LAUNCH / "ddp_plain_python.sbatch", "--policy", policy, "--select", "SITE", "--format", "json")
    assert done.returncode == 1
    (finding,) = json.loads(done.stdout)["findings"]
    assert finding["rule"] == "SITE101" and "asks for 8 GPUs" in finding["message"]
    done = cli("lint", LAUNCH / "clean_torchrun.sbatch", "--policy", policy, "--select", "SITE", "--format", "json")
    assert [f["rule"] for f in json.loads(done.stdout)["findings"]] == ["SITE101"]  # 8 GPUs per node too


@pytest.mark.parametrize("name", ["job.sbatch", "pod.yaml", "Dockerfile", "compose.yaml"])
def test_hostile_job_files_never_crash(tmp_path, name):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from gpudoctor.readers.registry import find

    alphabet = st.sampled_from(list("srun torchrun python -n --nproc_per_node=8 train.py $(x) ${A:-b} "
                                    "\"'`\\\n\t:[]{}-#|&;"
                                    ) + ["\nkind: PyTorchJob\n", "containers:\n - name: x\n", "nvidia.com/gpu: ",
                                         "#SBATCH --gres=gpu:", "CMD [\"", "bash -c \"", "command: [", "\n  "])
    path = tmp_path / name

    @settings(max_examples=60, deadline=None, database=None)
    @given(st.lists(alphabet, max_size=60).map("".join))
    def check(text):
        fmt = find(path, text)
        facts = fmt.read(path, text)
        assert isinstance(facts.jobs, list) and isinstance(facts.pods, list)

    check()


def test_check_env_file_reads_the_launch_model():
    done = cli("check", "--snapshot", FIXTURES / "machines" / "h100x8-healthy.json", "--env-file",
               LAUNCH / "ddp_plain_python.sbatch", "--select", "GD604", "--format", "json")
    assert done.returncode == 1
    assert [(f["rule"], f["location"]["line"]) for f in json.loads(done.stdout)["findings"]] == [("GD604", 11)]


def test_a_one_process_step_is_not_a_training_job_missing_ranks(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:8\nsrun --ntasks=1 python prep.py\n"
                   "srun --ntasks=1 python train.py\n")
    (tmp_path / "prep.py").write_text("import json\nprint(json.dumps({}))\n")
    (tmp_path / "train.py").write_text((LAUNCH / "train_ddp.py").read_text())
    _, report = lint(job)
    assert [(f.rule, str(f.severity), f.location.line) for f in report.findings if f.rule == "GD606"] == [
        ("GD606", "warning", 5)]


def test_a_count_with_a_shell_default_is_not_judged(tmp_path):
    """`--nproc_per_node=${GPUS_PER_NODE:-8}`: the container or caller may set GPUS_PER_NODE."""
    job, report = written_job(tmp_path, "run.sh", "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\n"
                      "torchrun --nproc_per_node=${GPUS_PER_NODE:-8} train.py\n")
    assert job["ranks_per_node"] is None and not [f for f in report.findings if f.rule == "GD606"]


def test_pre_commit_hook_for_job_files(tmp_path):
    """The job-file hook passes on a training config YAML (info only) and fails on a broken job."""
    import yaml

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    [hook] = [h for h in hooks if h["id"] == "gpudoctor-lint-jobs"]
    assert hook["entry"] == "gpudoctor lint --skip-unknown" and hook["types"] == ["text"]
    config = tmp_path / "config.yaml"
    config.write_text("trainer:\n  devices: 8\n")
    assert cli("lint", "--skip-unknown", config, "-q").returncode == 0
    assert cli("lint", config, "-q").returncode == 0
    assert cli("lint", "--skip-unknown", config, LAUNCH / "ddp_plain_python.sbatch", "-q").returncode == 1


def test_a_vendor_profile_exempts_only_its_own_environment_and_its_own_settings():
    """The EFA manifests of a folder do not exempt the NCCL knobs an unrelated sbatch script pins; in the same
    environment EFA exempts only what AWS publishes for it (NCCL_PROTO=simple), not NCCL_ALGO or the channels."""
    _, report = lint(LAUNCH / "nccl_tuned.sbatch", K8S / "eks_efa_pytorchjob.yaml")
    assert [(f.rule, f.location.line) for f in report.findings if f.rule == "GD411"] == [("GD411", 8),
                                                                                         ("GD411", 9)]
    from gpudoctor.readers.registry import read_env_files

    profile = Snapshot(facts={"env": {}})
    read_env_files([str(LAUNCH / "nccl_tuned.sbatch")], profile)
    profile.facts["env"]["FI_PROVIDER"] = "efa"  # the same environment (this process) runs EFA
    profile.facts["env_sources"]["FI_PROVIDER"] = {"path": str(LAUNCH / "nccl_tuned.sbatch"), "line": 1,
                                                   "scope": "--env-file"}
    profile.facts["env"]["NCCL_PROTO"] = "simple"
    profile.facts["env_sources"]["NCCL_PROTO"] = {"path": str(LAUNCH / "nccl_tuned.sbatch"), "line": 2,
                                                  "scope": "--env-file"}
    found = [f for f in evaluate(profile, LINT_RULES).findings if f.rule == "GD411"]
    assert [f.location.line for f in found] == [8, 9] and "AWS EFA is set up here" in found[0].message


LOCAL_RANK_SCRIPT = """import argparse, os
import torch.distributed as dist
parser = argparse.ArgumentParser()
parser.add_argument({options}, type=int, default={default})
args = parser.{parse}()
dist.init_process_group("nccl")
"""


@pytest.mark.parametrize("command,options,default,parse,torch,expected", [
    # torch.distributed.launch passes --local-rank from torch 2.0, --local_rank before; nothing with --use-env
    ("python -m torch.distributed.launch --nproc_per_node=2", '"--local_rank"', "-1", "parse_args", "2.4.1", "error"),
    ("python -m torch.distributed.launch --nproc_per_node=2", '"--local_rank"', "-1", "parse_args", "1.13.1", None),
    ("python -m torch.distributed.launch --nproc_per_node=2", '"--local-rank", "--local_rank"', "-1", "parse_args",
     "2.4.1", None),
    ("python -m torch.distributed.launch --nproc_per_node=2", '"--local_rank"', "-1", "parse_known_args", "2.4.1",
     "warning"),
    ("python -m torch.distributed.launch --use_env --nproc_per_node=2", '"--local_rank"', "-1", "parse_args", "2.4.1",
     "warning"),
    # the deepspeed launcher passes --local_rank (underscored) unless --no_local_rank
    ("deepspeed --num_gpus 2", '"--local-rank"', "-1", "parse_args", "2.4.1", "error"),
    ("deepspeed --num_gpus 2", '"--local_rank"', "-1", "parse_args", "2.4.1", None),
    # torchrun passes nothing: a script that waits for the option keeps its default, unless it reads LOCAL_RANK
    ("torchrun --nproc_per_node=2", '"--local_rank"', "-1", "parse_args", "2.4.1", "warning"),
    ("torchrun --nproc_per_node=2", '"--local_rank"', 'int(os.environ.get("LOCAL_RANK", 0))', "parse_args", "2.4.1",
     None),
    ("python", '"--local_rank"', "-1", "parse_args", "2.4.1", None),
])
def test_local_rank_argument(tmp_path, command, options, default, parse, torch, expected):
    (tmp_path / "train.py").write_text(LOCAL_RANK_SCRIPT.format(options=options, default=default, parse=parse))
    job = tmp_path / "run.sh"
    job.write_text(f"#!/bin/bash\n{command} train.py\n")
    snapshot = Snapshot(facts={"env": {}, "torch": {"version": torch}}, source={"kind": "files", "paths": []})
    read_file(job, snapshot)
    report = evaluate(snapshot, [rule for rule in LINT_RULES if rule.id == "GD609"])
    assert [str(f.severity) for f in report.findings] == ([expected] if expected else [])


def test_a_local_rank_option_without_default_stays_none(tmp_path):
    (tmp_path / "train.py").write_text('import argparse\nimport torch\nparser = argparse.ArgumentParser()\n'
                                       'parser.add_argument("--local_rank", type=int)\nargs = parser.parse_args()\n'
                                       'torch.distributed.init_process_group("nccl")\n'
                                       'torch.cuda.set_device(args.local_rank)\n')
    job = tmp_path / "run.sh"
    job.write_text("#!/bin/bash\ntorchrun --nproc_per_node=4 train.py\n")
    snapshot = Snapshot(facts={"env": {}}, source={"kind": "files", "paths": []})
    read_file(job, snapshot)
    json.dumps(snapshot.facts)  # the snapshot stays JSON
    [finding] = evaluate(snapshot, [rule for rule in LINT_RULES if rule.id == "GD609"]).findings
    assert "it stays None in every rank" in finding.message and finding.evidence["default"] is None


NO_LOCAL_RANK_SCRIPT = """import argparse
import deepspeed
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser = deepspeed.add_config_arguments(parser)
args = parser.{parse}
deepspeed.init_distributed()
"""
HYDRA_SCRIPT = """import os
import hydra
import torch.distributed as dist


@hydra.main(config_path="conf", config_name="train", version_base=None)
def main(cfg):
    dist.init_process_group("nccl")
    print(os.environ{env})


if __name__ == "__main__":
    main()
"""


@pytest.mark.parametrize("command,script,torch,expected", [
    # a launcher that passes the local rank, a parser that refuses options it does not know
    ("deepspeed --num_gpus 2", NO_LOCAL_RANK_SCRIPT.format(parse="parse_args()"), "2.4.1", "argparse"),
    ("python -m torch.distributed.launch --nproc_per_node=2", NO_LOCAL_RANK_SCRIPT.format(parse="parse_args()"),
     None, "argparse"),
    ("python -m torch.distributed.launch --nproc_per_node=2", HYDRA_SCRIPT.format(env='["LOCAL_RANK"]'), "1.13.1",
     "hydra"),
    # nothing refused: the parser keeps unknown options, parses a fixed list, or the launcher passes nothing
    ("deepspeed --num_gpus 2", NO_LOCAL_RANK_SCRIPT.format(parse="parse_known_args()[0]"), "2.4.1", None),
    ("deepspeed --num_gpus 2", NO_LOCAL_RANK_SCRIPT.format(parse='parse_args(["--epochs", "2"])'), "2.4.1", None),
    ("deepspeed --no_local_rank --num_gpus 2", NO_LOCAL_RANK_SCRIPT.format(parse="parse_args()"), "2.4.1", None),
    ("python -m torch.distributed.launch --use_env --nproc_per_node=2", HYDRA_SCRIPT.format(env='["LOCAL_RANK"]'),
     "2.4.1", None),
    ("torchrun --nproc_per_node=2", HYDRA_SCRIPT.format(env='["LOCAL_RANK"]'), "2.4.1", None),
    # the parser is built or extended elsewhere: that code may add --local_rank
    ("deepspeed --num_gpus 2", "import argparse\nfrom options import add_dist_args\n"
     "parser = argparse.ArgumentParser()\n"
     "add_dist_args(parser)\nargs = parser.parse_args()\n", "2.4.1", None),
    ("deepspeed --num_gpus 2", "from options import get_parser\nparser = get_parser()\nargs = parser.parse_args()\n",
     "2.4.1", None),
    # the script takes the launcher's argument out of sys.argv itself before Hydra sees it
    ("python -m torch.distributed.launch --nproc_per_node=2",
     HYDRA_SCRIPT.format(env='["LOCAL_RANK"]') + 'import sys\nsys.argv = [a for a in sys.argv '
                                                 'if not a.startswith("--local_rank")]\n', "1.13.1", None),
])
def test_a_parser_without_a_local_rank_option_refuses_the_launchers_argument(tmp_path, command, script, torch,
                                                                             expected):
    """deepspeed and torch.distributed.launch pass `--local_rank=N`: argparse without such an option, and Hydra
    (whose command line is key=value overrides), stop every rank with "unrecognized arguments"."""
    (tmp_path / "train.py").write_text(script)
    job = tmp_path / "run.sh"
    job.write_text(f"#!/bin/bash\n{command} train.py\n")
    snapshot = Snapshot(facts={"env": {}, "torch": {"version": torch}}, source={"kind": "files", "paths": []})
    read_file(job, snapshot)
    report = evaluate(snapshot, [rule for rule in LINT_RULES if rule.id == "GD609"])
    assert [(str(f.severity), f.evidence["parser"]) for f in report.findings] == (
        [("error", expected)] if expected else [])
    if expected:
        assert "unrecognized arguments: --local" in report.findings[0].message


@pytest.mark.parametrize("body,expected", [
    # the batch script runs once, on the first node: torchrun waits for a second node that never joins
    ("torchrun --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:29500 train.py",
     "error"),
    ("python -m torch.distributed.launch --nnodes 2 --node_rank 0 --nproc_per_node 4 train.py", "error"),
    ("accelerate launch --multi_gpu --num_machines 2 --num_processes 8 train.py", "error"),
    ("torchrun --nproc_per_node=4 train.py", "warning"),  # one node trains, the other idles
    # started on every node, or a one-process step
    ("srun --ntasks-per-node=1 torchrun --nnodes=2 --nproc_per_node=4 train.py", None),
    ("srun bash -c 'torchrun --nnodes=$SLURM_NNODES --node_rank=$SLURM_NODEID --nproc_per_node=4 train.py'", None),
    ("deepspeed --hostfile hosts.txt train.py", None),
    ("mpirun -np 8 -npernode 4 python train.py", None),
    ("python prepare_data.py --out /scratch/tokens", None),
    # this node's torchrun in the background, srun starts the other node's
    ("torchrun --nnodes=2 --node_rank=0 --nproc_per_node=4 train.py &\n"
     "srun -N 1 -n 1 -w $NODE2 torchrun --nnodes=2 --node_rank=1 --nproc_per_node=4 train.py\nwait", None),
])
def test_multi_node_batch_script_without_srun(tmp_path, body, expected):
    findings = job_findings(tmp_path, "job.sbatch", "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=4\n"
                            "#SBATCH --time=04:00:00\n\nexport MASTER_ADDR=$(scontrol show hostnames "
                            f"$SLURM_JOB_NODELIST | head -n 1)\n{body}\n", "GD610")
    assert [str(f.severity) for f in findings] == ([expected] if expected else [])
    if expected:
        assert "#SBATCH --nodes=2" in findings[0].message and "srun --ntasks-per-node=1 " in \
            findings[0].fix.commands[-1] and "train.py" in findings[0].fix.commands[-1]


@pytest.mark.parametrize("body,sets_master,expected", [
    ('torchrun --nproc_per_node=4 --node_rank 0 --master_addr node1 train.py --lr 1e-4 --data "/my data" --out $OUT',
     False, "srun --ntasks-per-node=1 torchrun --nproc_per_node=4 --nnodes=$SLURM_NNODES --rdzv_backend=c10d "
            '--rdzv_endpoint=$MASTER_ADDR:29500 train.py --lr 1e-4 --data "/my data" --out $OUT'),
    ("torchrun --nnodes=2 --nproc_per_node=4 train.py --epochs 3", True,
     "srun --ntasks-per-node=1 torchrun --nnodes=2 --nproc_per_node=4 --rdzv_backend=c10d "
     "--rdzv_endpoint=$MASTER_ADDR:29500 train.py --epochs 3"),
    ("accelerate launch --multi_gpu --num_machines 2 --num_processes 8 train.py --cfg a.yaml", False,
     "srun --ntasks-per-node=1 bash -c 'accelerate launch --multi_gpu --num_processes 8 --num_machines $SLURM_NNODES "
     "--machine_rank $SLURM_NODEID --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py --cfg a.yaml'"),
])
def test_srun_fix_rewrites_the_users_own_command(tmp_path, body, sets_master, expected):
    """GD610's fix keeps the launcher's options and the script's arguments, lets the rendezvous number the nodes,
    and sets MASTER_ADDR first when the script does not."""
    master = 'export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    (finding,) = job_findings(tmp_path, "job.sbatch", "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=4\n"
                              + (master + "\n" if sets_master else "") + body + "\n", "GD610")
    assert finding.fix.commands == ((expected,) if sets_master else (master, expected))


def test_one_node_batch_script_needs_no_srun(tmp_path):
    assert not job_findings(tmp_path, "job.sbatch", "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gres=gpu:4\n"
                            "torchrun --nproc_per_node=4 train.py\n", "GD610")


@pytest.mark.parametrize("command,fires", [
    ("torchrun --nnodes=1 --nproc_per_node=2 python train.py --lr 1e-4", True),
    ("srun --ntasks-per-node=1 bash -c 'torchrun --nproc_per_node=2 python3 train.py'", True),
    ("accelerate launch --num_processes 2 python train.py", True),
    ("python -m torch.distributed.launch --nproc_per_node 2 /usr/bin/python3 train.py", True),
    ("torchrun --no-python --nproc_per_node=2 python train.py", False),  # an executable, on purpose
    ("deepspeed --no_python --num_gpus 2 python train.py", False),
    ("torchrun --nproc_per_node=2 train.py", False),
])
def test_launcher_given_the_interpreter_as_its_script(tmp_path, command, fires):
    findings = job_findings(tmp_path, "run.sh", f"#!/bin/bash\nexport OMP_NUM_THREADS=8\n{command}\n", "GD611")
    assert len(findings) == (1 if fires else 0)
    if fires:
        assert "can't open file" in findings[0].message
        assert findings[0].fix.commands[0].endswith(" train.py" if "--lr" not in command else " train.py --lr 1e-4")
        assert " python train.py" not in findings[0].fix.commands[0]
        assert " python3 train.py" not in findings[0].fix.commands[0]


OWN_PARSER_SCRIPT = """import argparse
import torch.distributed as dist


def parse():
    parser = argparse.ArgumentParser(description="pretrain")
    parser.add_argument("--data_dir", type=str, required=True)
    parser.add_argument("--learning_rate", type=float, default=3e-4)
    group = parser.add_argument_group("schedule")
    group.add_argument("-e", "--epochs", type=int, default=10)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=True)
    return parser.parse_args()


if __name__ == "__main__":
    args = parse()
    dist.init_process_group("nccl")
"""


@pytest.mark.parametrize("arguments,refused,missing", [
    ("--data_dir /scratch/d --learning-rate 1e-4", ["--learning-rate"], []),  # - is not _ for argparse
    ("--data_dir /scratch/d --warmup 100", ["--warmup"], []),
    ("--learning_rate 1e-4", [], ["--data_dir"]),
    ("--data_dir /scratch/d --learning_rate=1e-4 --epochs 3 -e3", [], []),
    ("--data /scratch/d --learn 1e-4 --seed_offset -1", ["--seed_offset"], []),  # prefixes are fine
    ("--data_dir /scratch/d --learning_rate -1e-4", [], []),  # a negative number is a value
    ('"$@"', [], []),  # the arguments come from the caller
    ('--warmup 100 "$@"', ["--warmup"], []),  # a literal option is passed whatever "$@" holds
    ("--data_dir /d --no-compile", [], []),  # BooleanOptionalAction makes --no-compile
])
def test_options_the_script_does_not_define(tmp_path, arguments, refused, missing):
    (tmp_path / "pretrain.py").write_text(OWN_PARSER_SCRIPT)
    findings = job_findings(tmp_path, "run.sh", f"#!/bin/bash\ntorchrun --nproc_per_node=2 pretrain.py {arguments}\n",
                            "GD614")
    assert [(f.evidence["refused"], f.evidence["missing"]) for f in findings] == (
        [(refused, missing)] if refused or missing else [])
    if refused == ["--learning-rate"]:
        assert "did you mean --learning-rate → --learning_rate?" in findings[0].message


@pytest.mark.parametrize("script", [
    OWN_PARSER_SCRIPT.replace("parser.parse_args()", "parser.parse_known_args()[0]"),
    OWN_PARSER_SCRIPT.replace('    return parser.parse_args()',
                              '    add_model_args(parser)\n    return parser.parse_args()'),
    OWN_PARSER_SCRIPT.replace('group.add_argument("-e", "--epochs"', 'group.add_argument(*EPOCH_FLAGS'),
    OWN_PARSER_SCRIPT.replace('description="pretrain"', 'parents=[base_parser()]'),
])
def test_a_parser_the_script_does_not_fully_show_is_not_judged(tmp_path, script):
    (tmp_path / "pretrain.py").write_text(script)
    assert not job_findings(tmp_path, "run.sh", "#!/bin/bash\ntorchrun --nproc_per_node=2 pretrain.py --warmup 100\n",
                            "GD614")


@pytest.mark.parametrize("base,expected", [
    ("pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime", []),  # torch 1.x passes --local_rank, which it takes
    ("pytorch/pytorch:2.1.0-cuda12.1-cudnn8-runtime AS train", ["error"]),  # torch 2 passes --local-rank
    ("nvcr.io/nvidia/cuda:12.4.1-runtime-ubuntu22.04", ["warning"]),  # no torch version in the tag
])
def test_the_images_torch_decides_the_local_rank_spelling(tmp_path, base, expected):
    (tmp_path / "train.py").write_text(LOCAL_RANK_SCRIPT.format(options='"--local_rank"', default="-1",
                                                                parse="parse_args"))
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(f"FROM {base}\nWORKDIR /app\nCOPY train.py .\n"
                          "ENTRYPOINT python -m torch.distributed.launch --nproc_per_node 4 train.py\n")
    _, report = lint(dockerfile)
    assert [str(f.severity) for f in report.findings if f.rule == "GD609"] == expected


@pytest.mark.parametrize("gpus,nccl", [(1, False), (2, True)])
def test_one_gpu_pod_without_shm_blames_the_dataloader_not_nccl(tmp_path, gpus, nccl):
    """NCCL's shared-memory transport joins GPUs of one pod: with one GPU only the DataLoader's workers use /dev/shm."""
    manifest = tmp_path / "job.yaml"
    manifest.write_text("apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: finetune\nspec:\n  template:\n"
                        "    spec:\n      containers:\n        - name: trainer\n          image: trainer:1\n"
                        f"          resources:\n            limits:\n              nvidia.com/gpu: {gpus}\n")
    _, report = lint(manifest)
    (finding,) = [f for f in report.findings if f.rule == "GD901"]
    assert ("NCCL" in finding.message) is nccl and "DataLoader workers" in finding.message
    assert str(finding.severity) == ("warning" if nccl else "info")  # one GPU: only if the job starts workers


@pytest.mark.parametrize("lines,fires", [
    ("export MASTER_ADDR=localhost\ntorchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d "
     "--rdzv_endpoint=$MASTER_ADDR:29400 train.py", True),
    ("torchrun --nnodes 2 --node_rank $NODE_RANK --master_addr 127.0.0.1 --nproc_per_node 8 train.py", True),
    ("accelerate launch --num_machines 2 --machine_rank $RANK --main_process_ip localhost --num_processes 16 "
     "train.py", True),
    # node 0's own command (the other node's names node 0), one node, a real or run-time address
    ("torchrun --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 --nproc_per_node=8 train.py", False),
    ("CUDA_VISIBLE_DEVICES=2,3 torchrun --nnodes=2 --node_rank=1 --master_addr=localhost --nproc_per_node=2 train.py",
     False),  # two "nodes" tried out on one host
    ("torchrun --nnodes=1 --rdzv_endpoint=localhost:29400 --nproc_per_node=8 train.py", False),
    ("torchrun --nnodes=2 --rdzv_endpoint=10.0.0.5:29400 --nproc_per_node=8 train.py", False),
    ("torchrun --nnodes=2 --rdzv_endpoint=$HEAD:29400 --nproc_per_node=8 train.py", False),
])
def test_multi_node_rendezvous_at_a_loopback_address(tmp_path, lines, fires):
    findings = job_findings(tmp_path, "train_ddp.sh", f"#!/bin/bash\n{lines}\n", "GD613")
    assert len(findings) == (1 if fires else 0)
    if fires:
        assert "loopback" in findings[0].message and "never meet" in findings[0].message


@pytest.mark.parametrize("body,expected", [
    ("#!/bin/bash\n#SBATCH --time=02:00:00\nmodule load cuda/12.4\n#SBATCH --gres=gpu:4\n\nsrun python train.py\n",
     [("error", 4)]),
    ("#!/bin/bash\nsource venv/bin/activate\n#SBATCH --output=%j.log\n#SBATCH -N 2\ntorchrun train.py\n",
     [("warning", 3), ("error", 4)]),
    # a directive commented out on purpose, every directive first, or a batch script this one writes
    ("#!/bin/bash\n#SBATCH -N 1\nmkdir -p jobs\ncat > jobs/eval.sbatch <<'EOF'\n#!/bin/bash\n#SBATCH --gres=gpu:1\n"
     "srun python eval.py\nEOF\nsbatch jobs/eval.sbatch\nsrun python train.py\n", []),
    ("#!/bin/bash\n#SBATCH --gres=gpu:4\n##SBATCH --nodes=2\nmodule load cuda\n# SBATCH --time=1:00:00\n"
     "srun python train.py\n", []),
])
def test_sbatch_directives_after_the_first_command(tmp_path, body, expected):
    findings = job_findings(tmp_path, "job.sbatch", body, "GD615")
    assert sorted((str(f.severity), f.location.line) for f in findings) == sorted(expected)


def test_an_unquoted_expansion_of_several_words_is_split_like_the_shell_does(tmp_path):
    """`torchrun $DISTRIBUTED_ARGS run.py $OPTS`: the launcher's options and the script's arguments come from
    variables the file sets; each is several words once the shell splits it."""
    (tmp_path / "run_task.py").write_text(OWN_PARSER_SCRIPT)
    job = tmp_path / "pretrain.sh"
    job.write_text('#!/bin/bash\nGPUS_PER_NODE=2\nDISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes 1"\n'
                   'OPTS=""\nOPTS=$OPTS" --data_dir /scratch/d"\nOPTS=$OPTS" --learning_rate 1e-4 --warmup 5"\n'
                   "CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun ${DISTRIBUTED_ARGS} run_task.py ${OPTS}\n")
    snapshot, report = lint(job)
    (found,) = snapshot.facts["launch"]["jobs"]
    assert found["ranks_per_node"] == 2 and found["script"]["path"] == "run_task.py"
    assert found["script"]["args"][:2] == ["--data_dir", "/scratch/d"]
    assert [f.evidence["refused"] for f in report.findings if f.rule == "GD614"] == [["--warmup"]]
    assert [f.rule for f in report.findings if f.rule == "GD606"] == ["GD606"]  # 2 ranks, 4 GPUs


@pytest.mark.parametrize("directive,fires", [
    ("#SBATCh --gres=gpu:4", True), ("#sbatch --gres=gpu:4", True), ("#SBTACH --gres=gpu:4", True),
    ("#SBATC --nodes=2", True), ("#SBATCH --gres=gpu:4", False), ("# SBATCH --gres=gpu:4", False),
    ("##SBATCH --gres=gpu:4", False), ("#PBS -l nodes=2", False), ("#SBATCH_NOTE --x", False),
])
def test_a_misspelt_sbatch_directive_is_read_as_a_comment(tmp_path, directive, fires):
    job = tmp_path / "job.sbatch"
    job.write_text(f"#!/bin/bash\n#SBATCH --time=01:00:00\n{directive}\n\nsrun python train.py\n")
    _, report = lint(job)
    found = [f for f in report.findings if f.rule == "GD615"]
    assert [(f.location.line, f.evidence["misspelt"]) for f in found] == ([(3, True)] if fires else [])


@pytest.mark.parametrize("body,expected", [
    ("rank = dist.get_rank()\ntorch.cuda.set_device(rank)\n", ["dist.get_rank()"]),
    ('rank = int(os.environ["RANK"])\ndevice = torch.device("cuda", rank)\n', ["RANK"]),
    ('torch.cuda.set_device(int(os.environ["SLURM_PROCID"]))\n', ["SLURM_PROCID"]),
    ('model.cuda(dist.get_rank())\n', ["dist.get_rank()"]),
    # the local rank, a modulo of the node's GPUs, and mp.spawn's process index are per-node indices
    ('torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))\n', []),
    ("rank = dist.get_rank()\ntorch.cuda.set_device(rank % torch.cuda.device_count())\n", []),
    ("rank = dist.get_rank()\ndef worker(rank, world):\n    torch.cuda.set_device(rank)\n", []),
])
def test_global_rank_devices(body, expected):
    import ast

    from gpudoctor.readers.python.distributed import distributed_features
    from gpudoctor.readers.python.tree import Tree

    source = "import os\nimport torch\nimport torch.distributed as dist\n" + body
    found = distributed_features(Tree(ast.parse(source)), source.splitlines())["global_rank_device"]
    assert [entry["rank"] for entry in found] == expected


def test_transformer_engine_settings_of_a_one_gpu_job():
    """GD426 on an environment block copied from a multi-node Megatron/TE recipe into a one-GPU run."""
    snapshot, report = lint(LAUNCH / "te_sft_1gpu.sh")
    found = {(f.evidence["variable"], str(f.severity)) for f in report.findings if f.rule == "GD426"}
    assert found == {("NVTE_FWD_LAYERNORM_SM_MARGIN", "info"), ("NVTE_BWD_LAYERNORM_SM_MARGIN", "info"),
                     ("NVTE_ASYNC_AMAX_REDUCTION", "info"), ("NVTE_FLASH_ATTENTION", "warning"),
                     ("NVTE_FP8_DPA_BWD", "info")}  # the script trains in bf16: nothing runs FP8
    misspelt = next(f for f in report.findings if f.rule == "GD426" and "FLASH_ATTENTION" in f.message)
    assert "did you mean NVTE_FLASH_ATTN?" in misspelt.message
    assert not [f for f in report.findings if f.rule == "GD408"]  # no FSDP, no tensor parallelism: nothing to say
    # the same block beside a script that runs FP8 keeps NVTE_FP8_DPA_BWD
    snapshot.facts["requests"]["fp8"] = [{"source": "train_sft.py", "line": 7, "what": "te.fp8_autocast()"}]
    again = evaluate(snapshot, [rule for rule in LINT_RULES if rule.id == "GD426"])
    assert "NVTE_FP8_DPA_BWD" not in {f.evidence["variable"] for f in again.findings}


def test_transformer_engine_sm_margins_of_a_one_gpu_nemo_run_job():
    """GD426 and GD435 on a NeMo-Run launcher: its LocalExecutor starts one task and its recipe asks for one GPU
    (num_gpus_per_node=1, recipe.trainer.devices = 1), so the executor's env_vars tune what one GPU has not; the
    same launcher on eight GPUs keeps them."""
    _, report = lint(LAUNCH / "nemo_run_lora_1gpu_te.py")
    found = {(f.rule, f.evidence["variable"], str(f.severity), f.location.line) for f in report.findings
             if f.rule in ("GD426", "GD435")}
    assert found == {("GD426", "NVTE_FWD_LAYERNORM_SM_MARGIN", "info", 10),
                     ("GD426", "NVTE_BWD_LAYERNORM_SM_MARGIN", "info", 11),
                     ("GD435", "TORCH_NCCL_AVOID_RECORD_STREAMS", "info", 9)}
    job, = report.facts["launch"]["jobs"]
    assert job["gpus"]["count"] == 1 and job["gpus"]["what"] == "num_gpus_per_node=1 (the recipe)"
    _, report = lint(LAUNCH / "nemo_run_lora_8gpu_te.py")
    assert not [f for f in report.findings if f.rule in ("GD426", "GD435", "GD606")]
    assert report.facts["launch"]["jobs"][0]["gpus"]["count"] == 8
    # the executor starts the recipe itself: GD604 has no script started with plain python to wait for
    assert not report.unknown and {"GD604", "GD606"} <= set(report.passed)


@pytest.mark.parametrize("recipe", [
    "recipe = llm.llama3_8b.finetune_recipe(num_gpus_per_node=1)\nrecipe.trainer.devices = 2\n",  # they disagree
    "recipe = llm.llama3_8b.finetune_recipe(num_gpus_per_node=args.gpus)\n",  # read at run time
    "",  # no recipe in the file
])
def test_nemo_run_gpus_stay_unknown_where_the_recipe_does_not_say(tmp_path, recipe):
    path = tmp_path / "launch.py"
    path.write_text("import nemo_run as run\nfrom nemo.collections import llm\n\n" + recipe +
                    "executor = run.LocalExecutor(ntasks_per_node=1, env_vars={'NVTE_FWD_LAYERNORM_SM_MARGIN': '8'})\n")
    snapshot, report = lint(path)
    assert snapshot.facts["launch"]["jobs"][0]["gpus"] is None
    assert not [f for f in report.findings if f.rule == "GD426"]


def test_one_connection_beside_fsdp():
    _, report = lint(LAUNCH / "fsdp_one_connection.sh")
    (finding,) = [f for f in report.findings if f.rule == "GD408"]
    assert str(finding.severity) == "warning" and "train_fsdp.py:10" in finding.message
    assert finding.location.line == 3
