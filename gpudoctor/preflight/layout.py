"""Who this rank is in the allocation, and which ranks each node should run, from the launcher's variables.

torchrun sets GROUP_RANK (the node rank), GROUP_WORLD_SIZE (the nodes) and LOCAL_WORLD_SIZE; a node's ranks are
consecutive (torch.distributed.elastic assigns them node by node). srun sets SLURM_NODEID, SLURM_STEP_NODELIST and
SLURM_STEP_TASKS_PER_NODE; with its default block distribution a node's tasks are consecutive too. That is enough
to name the node of a rank that never arrived, and its host where SLURM lists it.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

from gpudoctor.preflight import PreflightError

if TYPE_CHECKING:
    from gpudoctor.rendezvous import Rank


@dataclass(frozen=True)
class Member:
    """This rank: its place in the job and on its node, and how it meets the others."""

    rank: int
    world_size: int
    local_rank: int
    node_rank: int
    host: str
    launcher: str  # torchrun | slurm
    master: str  # MASTER_ADDR
    port: int  # MASTER_PORT
    agent_store: bool  # torchrun's agent hosts the store (rank 0 is a client like the others)
    launched: Optional[Rank] = None  # as gpudoctor.rendezvous read the launcher's variables (None in tests)

    def arrival(self) -> dict:
        return {"rank": self.rank, "local_rank": self.local_rank, "node_rank": self.node_rank, "host": self.host}


def _int(env: Mapping[str, str], name: str) -> Optional[int]:
    text = (env.get(name) or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def node_host(env: Mapping[str, str]) -> str:
    """The node's name: on Kubernetes the node the pod runs on where the manifest passes it (NODE_NAME from
    `spec.nodeName`, deploy/kubernetes/preflight.yaml), otherwise this host's name."""
    if env.get("KUBERNETES_SERVICE_HOST") and env.get("NODE_NAME"):
        return env["NODE_NAME"]
    return socket.gethostname()


def member_from_env(environ: Optional[Mapping[str, str]] = None) -> Member:
    """This rank under torchrun or srun (the launcher's variables validated by gpudoctor.rendezvous, as for
    `bench nccl` and `check --fleet`), or a PreflightError saying how to start preflight."""
    from gpudoctor.rendezvous import launched_rank

    env = os.environ if environ is None else environ
    rank = launched_rank("preflight", environ)  # a RendezvousError (one line, exit 2) for values that cannot work
    if rank is None:
        raise PreflightError("preflight runs inside the job's launcher, one process per GPU: `srun --ntasks-per-node=8 "
                             "gpudoctor preflight` or `torchrun --nnodes=N --nproc-per-node=8 -m gpudoctor "
                             "preflight`")
    node_rank = _int(env, "GROUP_RANK") if rank.launcher == "torchrun" else _int(env, "SLURM_NODEID")
    return Member(rank=rank.rank, world_size=rank.world_size, local_rank=rank.local_rank,
                  node_rank=node_rank if node_rank is not None else 0, host=node_host(env), launcher=rank.launcher,
                  master=(env.get("MASTER_ADDR") or "").strip(), port=int((env.get("MASTER_PORT") or "0").strip()),
                  agent_store=env.get("TORCHELASTIC_USE_AGENT_STORE") == "True", launched=rank)


@dataclass(frozen=True)
class Expected:
    """The ranks each node should run (node rank → ranks) and the hosts the launcher names (node rank → host)."""

    ranks: Dict[int, List[int]]
    hosts: Dict[int, str]


def expected_layout(member: Member, environ: Optional[Mapping[str, str]] = None) -> Expected:
    """The allocation as the launcher describes it; where it does not (an unknown distribution), every rank is
    its own node until it arrives and says where it runs."""
    from gpudoctor.bench.launch import slurm_tasks_per_node
    from gpudoctor.rendezvous import slurm_hosts

    env = os.environ if environ is None else environ
    world = member.world_size
    if member.launcher == "torchrun":
        nodes, local = _int(env, "GROUP_WORLD_SIZE"), _int(env, "LOCAL_WORLD_SIZE")
        if nodes and local and nodes * local == world:
            return Expected({n: list(range(n * local, (n + 1) * local)) for n in range(nodes)}, {})
    else:
        counts = slurm_tasks_per_node(env)
        block = (env.get("SLURM_DISTRIBUTION") or "block").split(",")[0].split(":")[0] in ("block", "")
        if counts and sum(counts) == world and block:
            starts = [sum(counts[:n]) for n in range(len(counts))]
            hosts = slurm_hosts(env.get("SLURM_STEP_NODELIST") or env.get("SLURM_JOB_NODELIST") or "")
            ranks = {n: list(range(start, start + count)) for n, (start, count) in enumerate(zip(starts, counts))}
            return Expected(ranks, dict(enumerate(hosts)) if len(hosts) == len(counts) else {})
    return Expected({}, {})


def node_of(expected: Expected, rank: int) -> Optional[int]:
    for node, ranks in expected.ranks.items():
        if rank in ranks:
            return node
    return None


def label_nodes(arrivals: List[dict], expected: Expected) -> Dict[int, str]:
    """node rank → how the report names it: its host, or host and node rank where several nodes share one host
    (a test, a single machine); `node rank K` (or SLURM's host) for a node none of whose ranks arrived."""
    hosts: Dict[int, str] = dict(expected.hosts)
    for item in arrivals:
        hosts[item["node_rank"]] = item["host"]
    nodes = set(hosts) | set(expected.ranks)
    shared = {host for host in hosts.values() if sum(1 for h in hosts.values() if h == host) > 1}
    return {node: (f"node rank {node}" if node not in hosts else
                   f"{hosts[node]} (node {node})" if hosts[node] in shared else hosts[node]) for node in sorted(nodes)}


def node_table(arrivals: List[dict], expected: Expected, world: int) -> List[dict]:
    """`preflight.nodes`: each node's expected ranks and those that arrived."""
    labels = label_nodes(arrivals, expected)
    arrived_on: Dict[int, List[int]] = {}
    host_of: Dict[int, str] = dict(expected.hosts)
    for item in arrivals:
        arrived_on.setdefault(item["node_rank"], []).append(item["rank"])
        host_of[item["node_rank"]] = item["host"]
    ranks = {node: list(r) for node, r in expected.ranks.items()}
    if not ranks:  # the launcher did not say: each node has the ranks that arrived on it, and the others are unplaced
        ranks = {node: sorted(r) for node, r in arrived_on.items()}
        placed = {r for rs in ranks.values() for r in rs}
        for rank in range(world):
            if rank not in placed:
                ranks[-1 - rank] = [rank]
                labels[-1 - rank] = f"the node of rank {rank}"
    return [{"node": labels[node], "host": host_of.get(node), "node_rank": node if node >= 0 else None,
             "ranks": sorted(ranks[node]), "arrived": sorted(arrived_on.get(node, []))}
            for node in sorted(ranks, key=lambda node: (node < 0, abs(node)))]
