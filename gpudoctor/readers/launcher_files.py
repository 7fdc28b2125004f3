"""The files a launcher takes its rank count from, where the job names them:
- accelerate's config file (`accelerate launch --config_file cfg.yaml train.py`): `accelerate launch` starts
  `num_processes // num_machines` per machine (src/accelerate/utils/launch.py, `nproc_per_node`), one where
  `distributed_type` is `NO`; the command line's `--num_processes` wins over the file;
- the deepspeed launcher's hostfile (`deepspeed --hostfile hosts train.py`): one rank per slot of each host
  (`worker-0 slots=8`, deepspeed/launcher/runner.py `fetch_hostfile`); `--num_gpus` wins over the file."""

from __future__ import annotations

import re
from typing import Optional

import yaml


def accelerate_ranks(text: str, name: str) -> Optional[dict]:
    """{ranks_per_node, source, line} from the config's text (`name`: how the file is called in messages), or None
    when it is not an accelerate config or does not say how many processes."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(config, dict) or not ({"distributed_type", "compute_environment"} & set(config)):
        return None
    processes, machines = config.get("num_processes"), config.get("num_machines", 1)
    if str(config.get("distributed_type")) == "NO":
        processes, machines = 1, 1
    if not isinstance(processes, int) or isinstance(processes, bool) or not isinstance(machines, int) \
            or machines < 1 or processes < 1:
        return None
    found = re.search(r"(?m)^num_processes\s*:", text)
    line = text.count("\n", 0, found.start()) + 1 if found else 1
    over = f" over num_machines: {machines}" if machines > 1 else ""
    return {"ranks_per_node": processes // machines, "line": line,
            "source": f"num_processes: {processes}{over} in {name}"}


HOST_SLOTS = re.compile(r"^(\S+)\s+slots=(\d+)")  # deepspeed/launcher/runner.py fetch_hostfile's pattern


def deepspeed_ranks(text: str, name: str) -> Optional[dict]:
    """{ranks_per_node, source, line} from a hostfile whose hosts all have the same slots, else None."""
    slots = [(int(match.group(2)), number) for number, line in enumerate(text.splitlines(), 1)
             if not line.lstrip().startswith("#") for match in [HOST_SLOTS.match(line.strip())] if match]
    if not slots or len({count for count, _ in slots}) != 1:
        return None
    return {"ranks_per_node": slots[0][0], "line": slots[0][1], "source": f"slots={slots[0][0]} in {name}"}
