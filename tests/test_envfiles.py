"""The env-file readers: what each format sets, with its line; bad input is reported with the line, never raised."""

import json
from pathlib import Path

import pytest
from conftest import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudoctor.readers import python
from gpudoctor.readers.dockerfile import env as dockerfile
from gpudoctor.readers.dotenv import grammar as dotenv
from gpudoctor.readers.env import apply
from gpudoctor.readers.k8s import env as k8s
from gpudoctor.readers.registry import find, read_file
from gpudoctor.readers.shell.jobs import read_script
from gpudoctor.snapshot import Snapshot


def shell_env(text: str, path: str):
    """What a shell script sets (the env part of its one walk)."""
    return read_script(text, path)[0]


def found(result):
    """{name: (value, line)} of the assignments (last wins), with unresolved values marked by a leading '?'."""
    out = {}
    for item in result.assignments:
        if item.unset:
            out[item.name] = (None, item.line)
        else:
            out[item.name] = (("?" if item.unresolved else "") + (item.value or ""), item.line)
    return out


# --- .env ---------------------------------------------------------------------------------------------------

def test_dotenv_quotes_export_comments_and_escapes():
    text = (
        "# comment\n"
        "NCCL_DEBUG=WARN\n"
        "export NCCL_SOCKET_IFNAME = '=eth0'  # trailing comment\n"
        'NCCL_DEBUG_FILE="/tmp/nccl.%h.%p.log"\n'
        "UNQUOTED=a b c # comment\n"
        "HASH=a#b\n"
        'ESCAPED="line1\\nline2"\n'
        "SINGLE='it\\'s'\n"
        "EMPTY=\n"
        "BARE\n"
        'MULTI="first\n'
        'second"\n'
        "AFTER=1\n"
    )
    result = dotenv.read(text, ".env")
    assert not result.errors
    got = found(result)
    assert got["NCCL_DEBUG"] == ("WARN", 2)
    assert got["NCCL_SOCKET_IFNAME"] == ("=eth0", 3)
    assert got["NCCL_DEBUG_FILE"] == ("/tmp/nccl.%h.%p.log", 4)
    assert got["UNQUOTED"] == ("a b c", 5)
    assert got["HASH"] == ("a#b", 6)
    assert got["ESCAPED"] == ("line1\nline2", 7)
    assert got["SINGLE"] == ("it's", 8)
    assert got["EMPTY"] == ("", 9)
    assert "BARE" not in got  # python-dotenv: no value, not set
    assert got["MULTI"] == ("first\nsecond", 11)
    assert got["AFTER"] == ("1", 13)


def test_dotenv_expansions_are_kept_verbatim_and_noted():
    result = dotenv.read("A=${HOME}/x\nB='$HOME'\nC=$(hostname)\nD=plain\n", ".env")
    got = {item.name: item for item in result.assignments}
    assert got["A"].value == "${HOME}/x" and got["A"].unresolved
    assert got["B"].value == "$HOME" and got["B"].unresolved is None  # single quotes: literal
    assert got["C"].unresolved
    assert got["D"].unresolved is None


def test_dotenv_bad_line_is_an_error_with_its_line():
    result = dotenv.read("GOOD=1\nthis is not = valid\nALSO_GOOD=2\n", ".env")
    assert [line for _, line, _ in result.errors] == [2]
    assert set(found(result)) == {"GOOD", "ALSO_GOOD"}


def test_nccl_conf_takes_values_verbatim():
    result = dotenv.read_nccl_conf("# comment\nNCCL_DEBUG=WARN\nNCCL_IB_HCA=mlx5 # the HCAs\n", "nccl.conf")
    assert found(result)["NCCL_IB_HCA"] == ("mlx5 # the HCAs", 3)
    assert [line for _, line, _ in result.errors] == [3]


# --- shell / sbatch -----------------------------------------------------------------------------------------

def test_shell_export_forms_and_lines():
    text = (
        "#!/bin/bash\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --export=ALL,NCCL_DEBUG=WARN,EDITOR\n"
        "export NCCL_IB_HCA=\"=mlx5_0,mlx5_1\"\n"
        "export A=1 B='two words'\n"
        "declare -x C=3\n"
        "IFACE=ens5\n"
        "export NCCL_SOCKET_IFNAME=$IFACE\n"
        "LATER=x\n"
        "export LATER\n"
        "NOT_EXPORTED=1\n"
        "export \\\n"
        "    CONTINUED=yes\n"
        "NCCL_ALGO=Tree srun python train.py\n"
        "env NCCL_PROTO=Simple torchrun train.py\n"
        "unset B\n"
    )
    got = found(shell_env(text, "job.sbatch"))
    assert got["NCCL_DEBUG"] == ("WARN", 3)
    assert "EDITOR" not in got  # propagated, value unknown
    assert got["NCCL_IB_HCA"] == ("=mlx5_0,mlx5_1", 4)
    assert got["A"] == ("1", 5)
    assert got["C"] == ("3", 6)
    assert got["NCCL_SOCKET_IFNAME"] == ("ens5", 8)  # resolved from the literal assignment above
    assert got["LATER"] == ("x", 9)
    assert "NOT_EXPORTED" not in got and "IFACE" not in got
    assert got["CONTINUED"] == ("yes", 13)
    assert got["NCCL_ALGO"] == ("Tree", 14)
    assert got["NCCL_PROTO"] == ("Simple", 15)
    assert got["B"] == (None, 16)


def test_shell_sbatch_directives_stop_at_the_first_command():
    text = "#!/bin/bash\n#SBATCH --export=X=1\necho start\n#SBATCH --export=Y=2\n"
    got = found(shell_env(text, "job.sbatch"))
    assert "X" in got and "Y" not in got


def test_shell_dynamic_values_are_unresolved():
    text = ('export A="$(hostname)-x"\nexport B=${SLURM_LOCALID:-0}\nexport C=`date`\nexport D=~/logs\n'
            "export E='$literal'\nexport F=\"${A}\"\n")
    result = shell_env(text, "job.sh")
    items = {item.name: item for item in result.assignments}
    for name in "ABCDF":
        assert items[name].unresolved, name
    assert items["A"].value == "$(hostname)-x"
    assert items["E"].value == "$literal" and items["E"].unresolved is None


def test_shell_heredoc_bodies_are_skipped():
    text = "cat > cfg.sh <<'EOF'\nexport INSIDE=1\nEOF\nexport OUTSIDE=1\ncat <<-END\n\texport TAB=1\n\tEND\n"
    got = found(shell_env(text, "job.sh"))
    assert set(got) == {"OUTSIDE"}
    assert got["OUTSIDE"][1] == 4


def test_shell_conditionals_and_functions():
    text = (
        "export NCCL_DEBUG=WARN\n"
        "if [ \"$DEBUG\" = 1 ]; then\n"
        "  export NCCL_DEBUG=INFO\n"
        "fi\n"
        "debug() { export CUDA_LAUNCH_BLOCKING=1; }\n"
        "test -f x && export FROM_AND=1\n"
        "case $X in a) export IN_CASE=1 ;; esac\n"
        "export AFTER=1\n"
    )
    items = {}
    for item in shell_env(text, "job.sh").assignments:
        items.setdefault(item.name, []).append(item)
    assert [i.conditional for i in items["NCCL_DEBUG"]] == [False, True]
    assert items["CUDA_LAUNCH_BLOCKING"][0].conditional
    assert items["FROM_AND"][0].conditional
    assert items["IN_CASE"][0].conditional
    assert not items["AFTER"][0].conditional


def test_shell_set_a_exports_assignments():
    got = found(shell_env("set -a\nNCCL_DEBUG=WARN\nset +a\nNOT_EXPORTED=1\n", "job.sh"))
    assert got == {"NCCL_DEBUG": ("WARN", 2)}


def test_shell_launcher_options():
    text = (
        "mpirun -np 16 -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x NCCL_IB_HCA=mlx5 ./a.out\n"
        "mpiexec -genv NCCL_ALGO Ring ./a.out\n"
        "docker run --rm -e NCCL_P2P_DISABLE=1 --env=NCCL_SHM_DISABLE=1 --env NCCL_PROTO=LL image\n"
        "srun --export=ALL,NCCL_SOCKET_IFNAME=ib0 python x.py\n"
        "apptainer exec --env NCCL_NET=IB,NCCL_IB_TIMEOUT=22 image.sif python x.py\n"
        "SINGULARITYENV_NCCL_TOPO_FILE=/t.xml singularity exec i.sif python x.py\n"
    )
    got = found(shell_env(text, "job.sh"))
    assert got["NCCL_DEBUG"] == ("INFO", 1)
    assert got["NCCL_IB_HCA"] == ("mlx5", 1)
    assert "LD_LIBRARY_PATH" not in got
    assert got["NCCL_ALGO"] == ("Ring", 2)
    assert got["NCCL_P2P_DISABLE"] == ("1", 3)
    assert got["NCCL_SHM_DISABLE"] == ("1", 3)
    assert got["NCCL_PROTO"] == ("LL", 3)
    assert got["NCCL_SOCKET_IFNAME"] == ("ib0", 4)
    assert got["NCCL_NET"] == ("IB", 5) and got["NCCL_IB_TIMEOUT"] == ("22", 5)
    assert got["NCCL_TOPO_FILE"] == ("/t.xml", 6)


def test_shell_tensor_parallel_flags():
    text = ("TP=4\npython pretrain_gpt.py --tensor-model-parallel-size $TP --pipeline-model-parallel-size 2\n"
            "python megatron_gpt.py model.tensor_model_parallel_size=2\n"
            "python x.py --tensor-model-parallel-size=$UNKNOWN\n")
    result = shell_env(text, "job.sh")
    assert [(e["line"], e["size"], e["frameworks"]) for e in result.tensor_parallel] == [
        (2, 4, ["megatron"]), (3, 2, ["nemo"])]


@pytest.mark.parametrize("text", [
    "export A=\"unterminated\n", "export A='unterminated", "echo $(unclosed", "cat <<EOF\nno end", "((((",
    "}}}} fi done esac", "export", "\\", "export A=$'\\x41'\n", "a=(1 2 3)\nexport a\n", "#SBATCH --export",
])
def test_shell_odd_input_never_raises(text):
    shell_env(text, "odd.sh")


# --- Kubernetes / Compose -----------------------------------------------------------------------------------

MANIFESTS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  template:
    spec:
      containers:
      - name: app
        image: x
        env:
        - name: NCCL_DEBUG
          value: WARN
        - name: POD
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: LOG
          value: /logs/$(POD)
        - name: HOME_DIR
          value: /home/$(NOT_DEFINED)
        - name: BASE
          value: /opt
        - name: DERIVED
          value: $(BASE)/bin
        - name: ESCAPED
          value: $$(BASE)
        - name: EMPTY
---
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: mpi
spec:
  mpiReplicaSpecs:
    Launcher:
      template:
        spec:
          containers:
          - name: launcher
            image: x
            env:
            - name: NCCL_DEBUG
              value: INFO
            - name: NCCL_IB_DISABLE
              value: 1
"""


def test_k8s_multi_document_env_lists():
    result = k8s.read(MANIFESTS, "jobs.yaml")
    items = {}
    for item in result.assignments:
        items.setdefault(item.name, []).append(item)
    assert [(i.value, i.line) for i in items["NCCL_DEBUG"]] == [("WARN", 12), ("INFO", 43)]
    assert items["NCCL_DEBUG"][0].scope != items["NCCL_DEBUG"][1].scope
    assert "MPIJob mpi" in items["NCCL_DEBUG"][1].context and "(Launcher)" in items["NCCL_DEBUG"][1].context
    assert items["POD"][0].unresolved.startswith("valueFrom: fieldRef")
    assert items["LOG"][0].unresolved and items["LOG"][0].value == "/logs/$(POD)"
    assert items["HOME_DIR"][0].value == "/home/$(NOT_DEFINED)" and not items["HOME_DIR"][0].unresolved
    assert items["DERIVED"][0].value == "/opt/bin"
    assert items["ESCAPED"][0].value == "$(BASE)"
    assert items["EMPTY"][0].value == ""
    # value: 1 (a number) is rejected by the API server
    assert [(line, "NCCL_IB_DISABLE" in message) for message, line, _ in result.errors] == [(46, True)]


def test_k8s_yaml_that_does_not_parse_reports_its_line():
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    env: [\n"
    result = k8s.read(text, "bad.yaml")
    assert len(result.errors) == 1
    message, line, column = result.errors[0]
    assert "YAML does not parse" in message and line is not None


def test_k8s_documents_before_a_broken_one_are_kept():
    text = ("apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    env:\n"
            "    - name: NCCL_DEBUG\n      value: WARN\n---\nkind: Pod\n  bad: [\n")
    result = k8s.read(text, "two.yaml")
    assert found(result) == {"NCCL_DEBUG": ("WARN", 8)}
    assert result.errors and result.errors[0][1] >= 11


# the NCCL settings kept in a ConfigMap of the same file and taken with envFrom or configMapKeyRef
CONFIG_MAP_ENV = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nccl-env\ndata:\n  NCCL_DEBUG: INFO\n"
                  "  NCCL_IB_HCA: mlx5\n  bad-key: x\n---\nkind: Job\nspec:\n  template:\n    spec:\n"
                  "      containers:\n"
                  "      - name: trainer\n        image: x\n        envFrom:\n        - configMapRef:\n"
                  "            name: {name}\n          prefix: {prefix}\n        env:\n        - name: NCCL_DEBUG\n"
                  "          value: WARN\n        - name: HCA\n          valueFrom:\n            configMapKeyRef:\n"
                  "              name: {name}\n              key: NCCL_IB_HCA\n")


def test_k8s_env_from_a_config_map_of_the_same_file():
    result = k8s.read(CONFIG_MAP_ENV.format(name="nccl-env", prefix='""'), "job.yaml")
    # env entries override envFrom; a key that is not a variable name is skipped, as the kubelet does
    assert found(result) == {"NCCL_DEBUG": ("WARN", 22), "NCCL_IB_HCA": ("mlx5", 7), "HCA": ("mlx5", 24)}
    result = k8s.read(CONFIG_MAP_ENV.format(name="nccl-env", prefix="TRAIN_"), "job.yaml")
    assert found(result)["TRAIN_NCCL_IB_HCA"] == ("mlx5", 7)
    result = k8s.read(CONFIG_MAP_ENV.format(name="elsewhere", prefix='""'), "job.yaml")  # not in the file: unknown
    assert found(result) == {"NCCL_DEBUG": ("WARN", 22), "HCA": ("?<configMapKeyRef>", 24)}


def test_helm_templates_are_recognised():
    text = "apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    env:\n    {{- range .Values.env }}\n"
    result = k8s.read(text, "templates/pod.yaml")
    assert "helm template" in result.errors[0][0]


def test_k8s_bash_c_scripts_are_read_with_their_lines():
    result = k8s.read((FIXTURES / "jobs" / "seed002_topology_benchmark.yaml").read_text(), "bench.yaml")
    got = found(result)
    assert got["NCCL_DEBUG"] == ("INFO", 67)
    assert got["NCCL_SOCKET_IFNAME"] == ("eth0", 68)
    assert got["NCCL_TOPO_FILE"] == ("/etc/nccl/topology.xml", 27)



@pytest.mark.parametrize("command,args,expected", [
    ('["/bin/bash", "-c"]', '["export NCCL_DEBUG=INFO\\ntorchrun train.py"]', {"NCCL_DEBUG": ("INFO", 9)}),
    ('["bash", "-c", "export NCCL_DEBUG=INFO; torchrun train.py"]', "[]", {"NCCL_DEBUG": ("INFO", 7)}),
    ('["sh"]', '["-c", "export NCCL_DEBUG=INFO; torchrun train.py"]', {"NCCL_DEBUG": ("INFO", 9)}),
    ('["python", "-c", "export A=1"]', "[]", {}),  # whatever it holds, `python -c` runs Python, not a shell
])
def test_k8s_the_script_a_shell_runs_is_read_wherever_command_and_args_split_it(command, args, expected):
    text = (f"apiVersion: v1\nkind: Pod\nspec:\n  containers:\n  - name: a\n    image: x\n    command: {command}\n"
            f"    args:\n      {args}\n")
    assert found(k8s.read(text, "pod.yaml")) == expected

def test_compose_environment_mapping_and_list():
    text = ("services:\n  train:\n    image: x\n    environment:\n      NCCL_DEBUG: INFO\n      PASS:\n"
            "      TP: ${TP}\n  other:\n    environment:\n      - NCCL_P2P_DISABLE=1\n      - ONLY_NAME\n")
    got = found(k8s.read(text, "docker-compose.yml"))
    assert got["NCCL_DEBUG"] == ("INFO", 5)
    assert "PASS" not in got and "ONLY_NAME" not in got
    assert got["TP"][0].startswith("?")
    assert got["NCCL_P2P_DISABLE"] == ("1", 10)


# --- Dockerfile ----------------------------------------------------------------------------------------------

def test_dockerfile_env_forms_continuations_and_stages():
    text = (
        "FROM nvcr.io/nvidia/pytorch:24.01-py3 AS base\n"
        "ENV NCCL_DEBUG=INFO\n"
        "ARG VERSION=1\n"
        "FROM ubuntu:22.04 AS unrelated\n"
        "ENV UNRELATED=1\n"
        "FROM base\n"
        "ENV NCCL_SOCKET_IFNAME=eth0 \\\n"
        "    # a comment inside the continuation\n"
        "    NCCL_IB_HCA=\"=mlx5_0 \" \\\n"
        "    PATH_LIKE=/opt/${NCCL_SOCKET_IFNAME}\n"
        "ENV LEGACY_FORM some value with spaces\n"
        "ENV WITH_ARG=v$VERSION\n"
        "ENV ESCAPED=a\\ b\n"
    )
    result = dockerfile.read(text, "Dockerfile")
    assert not result.errors
    got = found(result)
    assert "UNRELATED" not in got  # another stage
    assert got["NCCL_DEBUG"] == ("INFO", 2)  # inherited from `base`
    assert got["NCCL_SOCKET_IFNAME"] == ("eth0", 7)
    assert got["NCCL_IB_HCA"] == ("=mlx5_0 ", 9)
    assert got["PATH_LIKE"] == ("/opt/eth0", 10)
    assert got["LEGACY_FORM"] == ("some value with spaces", 11)
    assert got["WITH_ARG"][0].startswith("?")  # a build argument: known only at build time
    assert got["ESCAPED"] == ("a b", 13)


def test_dockerfile_escape_directive_and_bad_env():
    text = "# escape=`\nFROM x\nENV A=1 `\n    B=2\nENV\nENV C\nENV D=1 E\n"
    result = dockerfile.read(text, "Dockerfile")
    got = found(result)
    assert got["A"] == ("1", 3) and got["B"] == ("2", 4) and got["D"] == ("1", 7)
    assert sorted(line for _, line, _ in result.errors) == [5, 6, 7]


# --- Python ---------------------------------------------------------------------------------------------------

PYTHON = '''\
import os
import subprocess
from os import environ as ENV
import nemo_run as run

os.environ["NCCL_DEBUG"] = "INFO"
ENV["NCCL_IB_DISABLE"] = "1"
os.environ.update({"NCCL_ALGO": "Tree"}, )
os.environ.update(NCCL_PROTO="Simple")
os.environ.setdefault("NCCL_P2P_LEVEL", "NVL")
os.putenv("NCCL_SHM_DISABLE", "1")
os.environ["CUDA_VISIBLE_DEVICES"] = args.gpus


def executor(nodes):
    env_vars = {
        "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",
        "NCCL_NVLS_ENABLE": 0,
        "RANK_HOST": f"{nodes}-x",
    }
    return run.SlurmExecutor(nodes=nodes, env_vars=env_vars)


subprocess.run(["torchrun", "x.py"], env={"NCCL_SOCKET_IFNAME": "ib0", **os.environ})
ray_job = dict(runtime_env={"env_vars": {"NCCL_CROSS_NIC": "0"}})
other = dict(NCCL_NET="IB")
if True:
    os.environ["IN_BRANCH"] = "1"
'''


def python_env(text: str, name: str = "launch.py"):
    """The env part of a Python file's facts (`name` is not on disk: `text` is what is read)."""
    return python.read(Path(name), text).env


def test_python_env_dicts_and_environ():
    result = python_env(PYTHON)
    items = {item.name: item for item in result.assignments}
    assert (items["NCCL_DEBUG"].value, items["NCCL_DEBUG"].line) == ("INFO", 6)
    assert items["NCCL_IB_DISABLE"].value == "1"
    assert items["NCCL_ALGO"].value == "Tree" and items["NCCL_PROTO"].value == "Simple"
    assert items["NCCL_P2P_LEVEL"].conditional  # setdefault: only when not set
    assert items["NCCL_SHM_DISABLE"].value == "1"
    assert items["CUDA_VISIBLE_DEVICES"].unresolved and items["CUDA_VISIBLE_DEVICES"].value == "args.gpus"
    assert items["TORCH_NCCL_AVOID_RECORD_STREAMS"].line == 17
    assert items["NCCL_NVLS_ENABLE"].value == "0"
    assert items["RANK_HOST"].unresolved
    assert items["NCCL_SOCKET_IFNAME"].value == "ib0"
    assert items["NCCL_CROSS_NIC"].value == "0"
    assert items["NCCL_NET"].value == "IB"
    assert items["IN_BRANCH"].conditional and not items["NCCL_DEBUG"].conditional
    assert items["TORCH_NCCL_AVOID_RECORD_STREAMS"].scope != items["NCCL_DEBUG"].scope


def test_python_syntax_error_is_reported_once_by_the_script_analysis():
    facts = python.read(Path("x.py"), "def broken(:\n")
    assert not facts.env.errors and not facts.env.assignments
    assert [problem.line for problem in facts.script.problems] == [1]



def test_lowercase_keys_count_only_in_os_environ():
    text = ("import os\npatched_env = {}\npatched_env['nccl_p2p_disable'] = '1'\n"
            "patched_env['NCCL_IB_DISABLE'] = '1'\nos.environ['nccl_debug'] = 'INFO'\n")
    names = [item.name for item in python_env(text).assignments]
    assert names == ["NCCL_IB_DISABLE", "nccl_debug"]  # accelerate's patch_environment upper-cases its keys


def test_python_that_cannot_be_parsed_is_reported_once(run_cli, tmp_path):
    deep = tmp_path / "deep.py"  # CPython's own parser gives up on this (RecursionError), as on null bytes
    deep.write_text("import os\nos.environ['NCCL_DEBUG'] = 'WARN'\nx = " + " + ".join(["1"] * 10000) + "\n")
    facts = python.read(deep, deep.read_text())
    assert facts.script.problems and not facts.env.errors
    facts = python.read(Path("nul.py"), "x = 1\0\n")
    assert facts.script.problems and not facts.env.errors
    report = json.loads(run_cli("lint", deep, "--format", "json")[1])
    assert [f["rule"] for f in report["findings"]] == ["GD003"]

# --- detection, merging, snapshot -----------------------------------------------------------------------

@pytest.mark.parametrize("name,text,fmt", [
    (".env", "A=1", "dotenv"), ("prod.env", "A=1", "dotenv"), (".env.local", "A=1", "dotenv"),
    ("job.sbatch", "", "shell"), ("run", "#!/usr/bin/env bash\necho", "shell"), ("job", "#SBATCH -N 2\n", "shell"),
    ("Dockerfile", "FROM x", "dockerfile"), ("Dockerfile.cuda", "", "dockerfile"),
    ("train.dockerfile", "", "dockerfile"),
    ("pod.yaml", "apiVersion: v1\nkind: Pod\n", "yaml"), ("compose.yml", "services:\n  a: {}\n", "yaml"),
    ("nccl.conf", "NCCL_DEBUG=WARN", "ncclconf"), ("launch.py", "", "python"),
    ("vars.txt", "A=1\nexport B=2\n", "dotenv"),
    ("config.yaml", "trainer:\n  devices: 8\n", "config-yaml"), ("ds.json", "{}", None), ("notes.md", "# hi", None),
    ("env.yaml", "export NCCL_DEBUG=WARN\nexport NCCL_IB_HCA=mlx5\n", "dotenv"),
    ("mnist_Dockerfile", "FROM pytorch/pytorch:2.4.0-cuda12.1\nRUN pip install x\n", "dockerfile"),
    ("build", "# syntax=docker/dockerfile:1\nARG BASE=nvcr.io/nvidia/pytorch:24.05-py3\nFROM $BASE\nENV A=1\n",
     "dockerfile"),
    ("run_train", "# launch on one node\nexport NCCL_DEBUG=WARN\ntorchrun --nproc_per_node 8 train.py\n", "shell"),
    ("README", "Run it with\nexport X=1 then torchrun\n", None),
    ("prep", "import os\nexport = 1\n", None),
    ("dockerfile.py", "import re\n", "python"), (".env", "export A=1\nB=2\n", "dotenv"),
])
def test_detect(name, text, fmt):
    found_format = find(Path(name), text)
    assert (found_format.name if found_format else None) == fmt


def test_apply_records_every_assignment_and_keeps_unknown_values_out_of_env():
    snapshot = Snapshot(facts={"env": {"NCCL_DEBUG": "WARN", "KEEP": "1"}})
    text = ("export NCCL_DEBUG=INFO\nexport NCCL_ALGO=Ring\nexport NCCL_ALGO=Tree\nexport X=$(hostname)\n"
            "export HF_TOKEN=abc\nexport HF_TOKEN=def\n")
    apply(snapshot, shell_env(text, "job.sh"), "job.sh")
    env, sources = snapshot.facts["env"], snapshot.facts["env_sources"]
    assert env["NCCL_DEBUG"] == "INFO" and env["KEEP"] == "1"
    assert "also" not in sources["NCCL_DEBUG"]  # the process's value is overridden, not a conflict
    assert env["NCCL_ALGO"] == "Tree"
    assert sources["NCCL_ALGO"]["line"] == 3
    assert sources["NCCL_ALGO"]["also"] == [{"path": "job.sh", "line": 2, "scope": "job.sh", "value": "Ring",
                                             "shadowed": True}]
    assert "X" not in env and sources["X"]["value"] == "$(hostname)" and sources["X"]["unresolved"]
    assert sources["HF_TOKEN"]["also"][0]["value"] == "abc"  # in memory; hidden wherever it leaves the program
    written = json.dumps(snapshot.to_json())
    assert '"value": "abc"' not in written and '"HF_TOKEN": "def"' not in written


def test_read_file_registers_the_readers_for_lint(tmp_path):
    path = tmp_path / "job.sbatch"
    path.write_text("#!/bin/bash\nexport NCCL_DEBUG=WARN\n")
    snapshot = Snapshot(facts={"env": {}})
    read_file(path, snapshot)
    assert snapshot.facts["env"] == {"NCCL_DEBUG": "WARN"}
    assert snapshot.facts["env_sources"]["NCCL_DEBUG"]["line"] == 2


def test_errors_become_inputs_with_their_line(tmp_path):
    path = tmp_path / "pod.yaml"
    path.write_text("apiVersion: v1\nkind: Pod\nspec: [\n")
    snapshot = Snapshot(facts={"env": {}})
    read_file(path, snapshot)
    (item,) = snapshot.facts["inputs"]
    assert item["kind"] == "env_file" and item["line"] == 4 and item["path"] == str(path)


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "jobs").iterdir()))
def test_every_job_fixture_reads_without_errors(name):
    path = FIXTURES / "jobs" / name
    text = path.read_text()
    result = find(path, text).read(path, text).env
    assert result.assignments
    if "bad" not in name:
        assert not result.errors, result.errors


# --- never raise -------------------------------------------------------------------------------------------

ALPHABET = st.sampled_from(list("export NCCL_=\"'$`(){}[]\\#;&|<>\n\t -:,^~*EOF ifthenfidoneesac")
                           + ["\r\n", "<<", "${"])


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=80).map("".join))
def test_readers_never_raise_on_random_text(text):
    for read in (shell_env, dotenv.read, dotenv.read_nccl_conf, dockerfile.read, k8s.read, python_env):
        result = read(text, "random")
        for message, _line, _column in result.errors:
            assert isinstance(message, str)


def test_windows_line_endings():
    shell_text = "#!/bin/bash\r\n#SBATCH --export=ALL,X=1\r\nexport Y=2 \\\r\n  Z=3\r\n"
    assert found(shell_env(shell_text, "job.sh")) == {"X": ("1", 2), "Y": ("2", 3), "Z": ("3", 4)}
    assert found(dotenv.read("A=1\r\nB='2'\r\n", ".env")) == {"A": ("1", 1), "B": ("2", 2)}
    assert found(dockerfile.read("FROM x\r\nENV A=1 \\\r\n    B=2\r\n", "Dockerfile")) == {"A": ("1", 2), "B": ("2", 3)}
