"""A fleet of recorded nodes that drift the way real clusters do, each node its own GPU UUIDs and host: the three
recorded DGX nodes of fixtures/fleet round-robin, changed on some nodes (a small /dev/shm, another driver, a torch
built for a newer CUDA, an NCCL variable, a token in the environment, an uncorrected ECC error on one GPU, no NVML
facts, a GPU missing, a failed probe, a pasted environment), so that findings, unknowns and cross-node groups differ
from node to node."""

import copy
import json
from pathlib import Path

FLEET = Path(__file__).resolve().parents[1] / "fixtures" / "fleet"
BASES = [json.loads((FLEET / f"dgx-0{n}.json").read_text()) for n in (1, 2, 3)]


def _gpus(facts):
    return facts.get("nvml", {}).get("gpus", [])


# (every how many nodes, what changes): deterministic, so a run gives the same fleet every time
DRIFTS = (
    (7, lambda facts, i: facts["host"].update(shm_bytes=64 * 2**20)),
    (11, lambda facts, i: facts["nvml"].update(driver_version="535.104.05", cuda_driver_version="12.2")),
    (13, lambda facts, i: facts["env"].update(NCCL_IB_HCA=f"mlx5_{i % 4}:1")),
    (17, lambda facts, i: facts["env"].update(HF_TOKEN=f"hf_{i:08d}abcdefghijklmnopqrstuv")),
    (19, lambda facts, i: _gpus(facts)[i % 8].update(ecc_uncorrected_volatile=i % 5 + 1)),
    (23, lambda facts, i: facts.pop("nvml")),
    (29, lambda facts, i: _gpus(facts).pop()),
    (31, lambda facts, i: facts["env"].update(NCCL_DEBUG="INFO")),
    (37, lambda facts, i: facts["torch"].update(status="error", error="ImportError: libcudart.so.12")),
    (41, lambda facts, i: facts["env"].pop("NCCL_SOCKET_IFNAME", None)),
    (5, lambda facts, i: facts["torch"].update(cuda="12.8", version="2.7.0+cu128")),
)


def mixed_nodes(count: int) -> list:
    """`count` snapshot documents, node00000 …, no two alike."""
    docs = []
    for index in range(count):
        doc = copy.deepcopy(BASES[index % len(BASES)])
        facts = doc["facts"]
        facts["host"]["hostname"] = f"node{index:05d}"
        for gpu in _gpus(facts):
            gpu["uuid"] = f"GPU-{index:08d}-{gpu.get('index', 0):04d}"
        for every, drift in DRIFTS:
            if index % every == every - 1:
                drift(facts, index)
        if index % 43 == 42:
            doc["probes"] = [{"name": "nvml", "status": "timeout", "seconds": 10.0, "error": "timed out"}]
        if index % 47 == 46:
            doc["origins"] = {"env": "report"}
        docs.append(doc)
    return docs


def write_mixed(folder: Path, count: int) -> list:
    """The mixed nodes as snapshot files in `folder`; their paths."""
    paths = []
    for index, doc in enumerate(mixed_nodes(count)):
        path = folder / f"node{index:05d}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    return paths
