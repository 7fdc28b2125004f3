"""A fake rank for the rendezvous tests: it joins the job's gloo group as RANK of WORLD_SIZE (env://), then
misbehaves as told by its one argument. Run as a script; it speaks gpudoctor.rendezvous's exchange (an int64
length to every rank, then the bytes to rank 0) so that what rank 0 does with bad data is what is tested.

- die: leave right after joining (a peer that crashed)
- greet: exchange host names with every rank as `bench nccl` does, then leave (a peer that crashed mid-sweep)
- announce:N: announce N bytes (64 MiB, a negative length …) and then wait to be dropped
- send:KIND: announce and send KIND's bytes: deep (JSON 50,000 arrays deep), pickle, latin1 (not UTF-8)
"""

import datetime
import os
import pickle
import sys
import time

import torch
import torch.distributed as dist

BODIES = {"deep": b"[" * 50_000 + b"]" * 50_000, "pickle": pickle.dumps({"node": "x"}), "latin1": b'"caf\xe9"'}


def main(how: str) -> None:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    if how == "die":
        os._exit(0)
    if how == "greet":
        name = b'"peer"'
        lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(lengths, torch.tensor([len(name)], dtype=torch.int64))
        mine = torch.zeros(max(int(t.item()) for t in lengths), dtype=torch.uint8)
        mine[:len(name)] = torch.frombuffer(bytearray(name), dtype=torch.uint8)
        dist.all_gather([torch.zeros_like(mine) for _ in range(world)], mine)
        os._exit(0)
    kind, _, value = how.partition(":")
    body = BODIES.get(value, b"")
    length = int(value) if kind == "announce" else len(body)
    lengths = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(lengths, torch.tensor([length], dtype=torch.int64))
    if kind == "send":
        dist.send(torch.frombuffer(bytearray(body), dtype=torch.uint8), 0)
        box = torch.zeros(1, dtype=torch.int64)
        dist.broadcast(box, 0)  # rank 0's verdict
        print(f"verdict {int(box.item())}")
    time.sleep(30)  # rank 0 drops us; the test kills us
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1])
