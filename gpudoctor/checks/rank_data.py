"""GD618-GD620: what each rank receives and reads — `broadcast_object_list` lists that cannot receive
(`facts["scripts"][*]["broadcasts"]`, gpudoctor.readers.python.broadcast) and how the DataLoaders of a DDP/FSDP
script split the data between ranks (`facts["scripts"][*]["data"]`, gpudoctor.readers.python.samplers)."""

from __future__ import annotations

from typing import List

from gpudoctor.checks import check
from gpudoctor.facts.jobs import scripts
from gpudoctor.model import Location

WRAPPERS = {"DistributedDataParallel", "FullyShardedDataParallel", "fully_shard"}  # launch.init kinds
MAX_SHOWN = 3


@check("GD618")
def broadcast_object_list_not_received(facts, rule):
    for script in scripts(facts):
        for call in script.get("broadcasts") or []:
            if call.get("problem") == "temporary":
                message = (f"`{call.get('what')}` passes a list built in the call ({call.get('list_what')}): torch "
                           "writes what the other ranks receive into that list, which nothing keeps, so the names in "
                           "it stay as they were there (None, typically)")
                fix = rule.fix(case="temporary")
            else:
                message = (f"`{call.get('what')}`: the list it passes has another length on some ranks (line "
                           f"{call.get('list_line')}: `{call.get('list_what')}`); every rank must pass a list of the "
                           "same length, which torch fills in place on the ranks other than src — otherwise the "
                           "size broadcast does not match (gloo aborts \"Received data size doesn't match expected "
                           "size\", NCCL can hang or hand back garbage)")
                fix = rule.fix(case="sizes")
            yield rule.finding(message, location=Location(str(script.get("path")), call.get("line")),
                               evidence={"call": call.get("what"), "list": call.get("list_what"),
                                         "problem": call.get("problem")},
                               fix=fix)


def _wrapped(script: dict) -> List[dict]:
    """The DDP/FSDP wrappers the script applies (`launch.init`)."""
    return [entry for entry in (script.get("launch") or {}).get("init") or [] if entry.get("kind") in WRAPPERS]


@check("GD619")
def ddp_data_not_split(facts, rule):
    for script in scripts(facts):
        data, wrappers = script.get("data"), _wrapped(script)
        if not data or not wrappers or data.get("sharded_by"):
            continue
        unsplit = [loader for loader in data.get("loaders") or [] if loader.get("sampler") == "none"
                   and loader.get("training") and not loader.get("iterable")]
        if not unsplit:
            continue
        first, wrapper = unsplit[0], wrappers[0]
        more = f" (and line {', '.join(str(u.get('line')) for u in unsplit[1:MAX_SHOWN])})" if len(unsplit) > 1 else ""
        yield rule.finding(
            f"`{first.get('what')}`{more} has no DistributedSampler in a script that trains with "
            f"`{wrapper.get('what')}` (line {wrapper.get('line')}): every rank reads the whole data set, so an epoch "
            "does the work of one as many times as there are ranks",
            location=Location(str(script.get("path")), first.get("line")),
            evidence={"loaders": [u.get("what") for u in unsplit[:MAX_SHOWN]], "wrapper": wrapper.get("what")},
            fix=rule.fix())


@check("GD620")
def distributed_sampler_without_set_epoch(facts, rule):
    for script in scripts(facts):
        data = script.get("data") or {}
        shuffled = [s for s in data.get("samplers") or [] if s.get("shuffle") and not s.get("escapes")]
        loop = data.get("epoch_loop")
        if not shuffled or not loop or data.get("set_epoch") or data.get("sharded_by"):
            continue
        sampler = shuffled[0]
        yield rule.finding(
            f"`{sampler.get('what')}` shuffles with seed + epoch, but the script never calls `set_epoch` in its "
            f"epoch loop (`{loop.get('what')}`, line {loop.get('line')}): every epoch reads the data in the first "
            "epoch's order",
            location=Location(str(script.get("path")), sampler.get("line")),
            evidence={"sampler": sampler.get("what"), "epoch_loop": loop.get("what")},
            fix=rule.fix(values={"line": loop.get("line")}))
