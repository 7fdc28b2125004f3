"""`gpudoctor preflight`: before training starts, the job's whole allocation tested together, each problem named.

Started by the job's launcher (torchrun, srun, a Kubernetes initContainer), one process per GPU, in phases with
deadlines of their own: meet (the launcher's store, gloo), agree (every node's facts through the fleet rules), each
GPU alone (a timed matmul and copy), the fabric (`bench nccl`'s all-reduce within nodes, across them, between pairs).
`layout` says who the ranks are, `meeting` meets them and shares verdicts, `measure` times, `run` runs the phases,
`result` names the bad nodes. The verdicts are rules of the catalog (GD806–GD809) over the `preflight` facts.
"""

from __future__ import annotations

from gpudoctor.errors import InputError


class PreflightError(InputError):
    """Preflight itself cannot run (no launcher, no torch, no store to meet at): one line, exit 2."""
