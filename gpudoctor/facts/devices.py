"""Which GPUs a job uses: CUDA's devices mapped onto NVML's.

NVML numbers GPUs by PCI bus; CUDA numbers the devices it can open (SLURM's cgroups hide the others), fastest
first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, and a GPU in MIG mode appears as the MIG devices the driver's branch
lets one process use (MIG_RULES). The mapping is exact when the torch probe recorded each CUDA device's UUID;
otherwise it is read from CUDA_VISIBLE_DEVICES and said to be assumed where CUDA's order is a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List, Optional

from gpudoctor.facts import MissingFact

HIDES_ALL = ("", "-1")
_LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")  # R450's MIG-GPU-<uuid>/<gi>/<ci>


_UNCOUNTED = "the report names the GPU but not how many there are"


def require_count(facts) -> None:
    """MissingFact where `nvml.gpus` holds only the GPU a report named without saying how many there are."""
    if facts.get("nvml.gpus_counted", None) is False:
        raise MissingFact("nvml.gpus_counted", _UNCOUNTED)


@dataclass(frozen=True)
class JobGpus:
    """The devices a job's CUDA sees, as NVML fact dicts (GPUs, or MIG devices with `parent_index`)."""

    devices: List[dict]
    basis: str  # "uuid" (CUDA's own UUIDs), "slurm_gpus" (by GRES index), "cuda_visible_devices",
    #             "nvidia_visible_devices", "all", "none"
    assumption: Optional[str] = None  # why the CUDA↔NVML mapping is only assumed, when it is
    counted: bool = True  # False: a report named one GPU and not how many (nvml.gpus_counted)

    def count(self) -> int:
        """How many devices the job uses; MissingFact where a report named a GPU without saying how many."""
        if not self.counted:
            raise MissingFact("nvml.gpus_counted", _UNCOUNTED)
        return len(self.devices)

    def note(self) -> str:
        """' (…assumed…)' to append to a message about these devices, '' when the mapping is known."""
        return f" ({self.assumption})" if self.assumption else ""


def _key(uuid) -> str:
    """A UUID as hex digits only: NVML writes GPU-…/MIG-…, torch the bare UUID."""
    return re.sub(r"^(GPU|MIG)-", "", str(uuid or "")).replace("-", "").lower()


class MigDevice(dict):
    """A MIG device as CUDA numbers it: its NVML entry (`nvml.gpus[].mig_devices[]`) with its GPU's `parent_index`,
    `parent_uuid` and compute capability."""


def is_mig(device: dict) -> bool:
    """Whether a device of a job's list is a MIG device (else a whole GPU, `nvml.gpus[]`)."""
    return isinstance(device, MigDevice)


def _mig_device(gpu: dict, mig: dict) -> dict:
    device = MigDevice(mig, parent_index=gpu.get("index"), parent_uuid=gpu.get("uuid"))
    device.setdefault("index", gpu.get("index"))
    if gpu.get("cc"):
        device.setdefault("cc", gpu["cc"])
    return device


def _all_devices(gpus: list) -> list:
    """Every GPU and every MIG device NVML listed."""
    return list(gpus) + [_mig_device(g, m) for g in gpus for m in g.get("mig_devices", [])]


# NVIDIA Multi-Instance GPU User Guide, "MIG Device Names › CUDA Device Enumeration"
# (https://docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html#cuda-device-enumeration).
MIG_PER_GPU_INSTANCE_FROM = 570  # the first driver branch where one process may use several MIG devices
MIG_RULES = {
    "one": ("with CUDA 11/R450 and CUDA 12/R525, 'a single CUDA process can only enumerate a single MIG device' "
            "and 'CUDA will not enumerate non-MIG GPU if any compute instance is enumerated on any other GPU' "
            "(NVIDIA's MIG user guide; drivers before R570)"),
    "per_gpu_instance": ("'starting with CUDA 12/R570, enumeration of a single compute instance (CI) per GPU "
                         "instance (GI) is supported' (NVIDIA's MIG user guide)"),
}


def mig_rule(driver) -> str:
    """Which of MIG_RULES the driver follows: "per_gpu_instance" from R570, "one" before it and when the driver
    version is unknown (the stricter rule)."""
    major = re.match(r"(\d+)\.", str(driver or ""))
    return "per_gpu_instance" if major and int(major.group(1)) >= MIG_PER_GPU_INSTANCE_FROM else "one"


def usable_gpus(gpus: list) -> list:
    """The GPUs CUDA can open: `gpus` holds only those this process may open, less the broken ones."""
    return [gpu for gpu in gpus if not gpu.get("error_kind")]


def mig_without_instances(gpu: dict) -> bool:
    """MIG mode on and, as NVML listed them, no MIG device at all (none hidden from this process either): the
    state after a reboot that nothing recreated the instances in. CUDA sees no device on such a GPU."""
    return bool(gpu.get("mig_enabled")) and gpu.get("mig_devices") == [] and not gpu.get("mig_devices_hidden")


def _as_cuda_sees(gpu: dict) -> list:
    """A GPU as CUDA could number it: itself, or in MIG mode its MIG devices (none where NVML listed none; a
    report that says MIG is on without listing the devices leaves the GPU whole)."""
    if gpu.get("mig_enabled") and "mig_devices" in gpu:
        return [_mig_device(gpu, mig) for mig in gpu["mig_devices"]]
    return [gpu]


def limit_mig(devices: list, driver) -> list:
    """What one CUDA process gets of `devices` (in CUDA's order): before R570 a single MIG device, and then no
    GPU outside MIG ('CUDA is limited to use a single CI and will pick the first one available if several of
    them are visible'); from R570 one compute instance per GPU instance ('If CUDA_VISIBLE_DEVICES is not set,
    CUDA will pick one from each GPU instance'; several named in one: 'CUDA will pick one from the list')."""
    migs = [d for d in devices if is_mig(d)]
    if not migs:
        return list(devices)
    if mig_rule(driver) == "one":
        return migs[:1]
    kept, instances = [], set()
    for device in devices:
        instance = (device.get("parent_uuid"), device.get("gpu_instance_id")) if is_mig(device) else None
        if instance is None or instance[1] is None or instance not in instances:
            kept.append(device)
            instances.add(instance)
    return kept


def cuda_devices(gpus: list, driver=None) -> list:
    """What CUDA enumerates with no CUDA_VISIBLE_DEVICES, in NVML (PCI) order: each GPU that answers, a GPU in MIG
    mode as the MIG devices the driver lets one process use (limit_mig)."""
    return limit_mig([device for gpu in usable_gpus(gpus) for device in _as_cuda_sees(gpu)], driver)


def mig_dropped(devices: list, driver) -> str:
    """Why CUDA leaves some of `devices` out ('' when it uses them all): the guide's rule for the driver."""
    return "" if len(limit_mig(devices, driver)) == len(devices) else MIG_RULES[mig_rule(driver)]


def _mig_assumption(assumption: Optional[str], devices: list, driver, order: str) -> Optional[str]:
    """`assumption`, and where CUDA leaves MIG devices out, the rule and which one it is assumed to keep."""
    dropped = mig_dropped(devices, driver)
    if not dropped:
        return assumption
    which = "the first" if mig_rule(driver) == "one" else "the first of each GPU instance"
    return "; ".join(filter(None, (assumption, f"{dropped}: CUDA assumed to use {which} {order}")))


def device_by_uuid(gpus: list, uuid) -> Optional[dict]:
    """The NVML GPU or MIG device (with its parent's index) whose UUID is `uuid`, written as NVML does (GPU-…,
    MIG-…) or as torch does (bare); None when no device has it. For bench: a CUDA device's MIG facts."""
    key = _key(uuid)
    return next((d for d in _all_devices(gpus) if key and _key(d.get("uuid")) == key), None)


def _by_uuid(gpus: list, wanted: str) -> Optional[dict]:
    """The GPU or MIG device whose UUID `wanted` names (CUDA accepts a unique prefix)."""
    legacy = _LEGACY_MIG.match(wanted)
    if legacy:
        parent, instance = legacy.group(1).lower(), (int(legacy.group(2)), int(legacy.group(3)))
        matches = [_mig_device(g, m) for g in gpus for m in g.get("mig_devices", [])
                   if str(g.get("uuid", "")).lower() == parent
                   and (m.get("gpu_instance_id"), m.get("compute_instance_id")) == instance]
    else:
        matches = [d for d in _all_devices(gpus) if str(d.get("uuid", "")).lower().startswith(wanted.lower())]
    return matches[0] if len(matches) == 1 else None


def _order_assumption(facts, devices: list) -> Optional[str]:
    if (facts.env("CUDA_DEVICE_ORDER") or "").upper() == "PCI_BUS_ID":
        return None
    names = {d.get("name") for d in devices}
    if len(names) > 1:
        return ("CUDA indices mapped onto NVML's PCI order, but CUDA numbers mixed GPUs fastest first: set "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID or give UUIDs")
    return "CUDA indices assumed to follow NVML's PCI order (identical GPUs)"


_MIG_BY_INDEX = ("a GPU in MIG mode chosen by index: which of its MIG devices CUDA numbers is assumed (name MIG "
                 "devices by UUID, MIG-…)")


def _named(facts, visible: str, gpus: list) -> tuple:
    """The devices CUDA_VISIBLE_DEVICES names, in its order, before the MIG limit, and why the mapping is assumed.
    An index names a GPU CUDA can open (in MIG mode: its MIG devices); a UUID names a GPU or MIG device."""
    usable = usable_gpus(gpus)
    named, assumption = [], None
    entries = [entry.strip() for entry in visible.split(",")]
    if len(set(entries)) < len(entries):
        return [], None  # a device named twice: CUDA sees none (GD107 reports it)
    for entry in entries:
        if entry.isdigit():
            devices = _as_cuda_sees(usable[int(entry)]) if int(entry) < len(usable) else []
            assumption = assumption or _order_assumption(facts, usable)
            if any(is_mig(d) for d in devices):
                assumption = _MIG_BY_INDEX
        else:
            device = _by_uuid(gpus, entry) if entry.startswith(("GPU-", "MIG-")) else None
            devices = [device] if device else []
        if not devices:
            break  # CUDA ignores an invalid entry and every one after it (GD107 reports it)
        named += devices
    return named, assumption


def named_devices(facts, visible: str) -> list:
    """The devices CUDA_VISIBLE_DEVICES names, before the MIG limit (for GD107)."""
    return _named(facts, visible, facts.get("nvml.gpus", None) or [])[0]


def _from_visible(facts, visible: str, gpus: list, basis: str = "cuda_visible_devices") -> JobGpus:
    named, assumption = _named(facts, visible, gpus)
    driver = facts.get("nvml.driver_version", None)
    return JobGpus(limit_mig(named, driver), basis, _mig_assumption(assumption, named, driver, "named"))


def _from_torch(facts, gpus: list) -> Optional[JobGpus]:
    """The NVML devices whose UUIDs torch's CUDA devices carry, in CUDA order; None when torch did not say."""
    if facts.get("torch.status", None) != "ok":
        return None
    torch_devices = facts.get("torch.devices", None) or []
    if not torch_devices or not all(d.get("uuid") for d in torch_devices) or facts.get("torch.device_errors", None):
        return None  # no UUIDs, or a device whose properties could not be read: not every CUDA device is known
    found = [device_by_uuid(gpus, d["uuid"]) for d in torch_devices]
    chosen = [gpu for gpu in found if gpu is not None]
    if len(chosen) != len(found):
        return None  # torch sees a device NVML does not: fall back to the environment
    return JobGpus(chosen, "uuid")


def _torch_without_uuids(facts) -> Optional[str]:
    """Why the mapping is assumed when torch ran but gave its devices no UUID: the property arrived in torch 2.4
    (pytorch PR #125083, `torch.cuda.get_device_properties(i).uuid`)."""
    devices = facts.get("torch.devices", None) or [] if facts.get("torch.status", None) == "ok" else []
    if devices and not all(d.get("uuid") for d in devices):
        version = facts.get("torch.version", None)
        return (f"{'torch ' + version if version else 'this torch'} gives no device UUIDs (torch 2.4+ does): "
                "CUDA's devices assumed to be NVML's in PCI order")
    return None


# Slurm 21.08+ (SchedMD/slurm 0ebfd37834, "Use device index, not dev_num, as the global GPU id in prolog/epilog"):
# src/plugins/gres/common/gres_common.c writes `gres_device->index` into SLURM_JOB_GPUS / SLURM_STEP_GPUS, a position
# in slurmd's list of the node's GPUs, not the /dev/nvidiaN minor number. slurmd sorts that list by the number ending
# each gres.conf `File=` (gres_gpu.c `_sort_gpu_by_file`), GPUs it detects (`AutoDetect=nvml`) in the order NVML
# enumerates them ("the order they enumerate on the PCI bus"): gpudoctor.probes.slurm reads which.
SLURM_INDEX_ASSUMED = ("Slurm's GPU IDs are GRES indices, read in NVML's PCI order as gres.conf's AutoDetect=nvml "
                       "numbers the GPUs; gres.conf could not be read, and one that lists File= numbers them by "
                       "minor number")


def gpu_minors(files: List[str]) -> Optional[List[int]]:
    """The minor numbers of /dev/nvidiaN device files; None when one is not such a file."""
    numbers = [match for match in (re.fullmatch(r".*/nvidia(\d+)", name) for name in files) if match]
    return [int(match.group(1)) for match in numbers] if files and len(numbers) == len(files) else None


def _slurm_order(facts, gpus: list) -> tuple:
    """slurmd's list of the node's GPUs (GRES index → NVML device) and why it is assumed (None: gres.conf says)."""
    pci = [device for gpu in gpus for device in _as_cuda_sees(gpu)]
    if facts.get("slurm.gpu_autodetect", None) == "nvml":
        return pci, None
    minors = gpu_minors(facts.get("slurm.gpu_files", None) or [])
    by_minor = {gpu["minor_number"]: gpu for gpu in gpus if gpu.get("minor_number") is not None}
    if minors and all(minor in by_minor for minor in minors):
        return [by_minor[minor] for minor in minors], None
    in_pci_order = [gpu.get("minor_number") for gpu in gpus] == sorted(by_minor) and len(by_minor) == len(gpus)
    return pci, None if in_pci_order else SLURM_INDEX_ASSUMED  # minors in PCI order: both numberings agree


def _from_slurm(facts, gpus: list) -> Optional[JobGpus]:
    """The GPUs SLURM gave the job or step, by the GRES indices in SLURM_STEP_GPUS / SLURM_JOB_GPUS (_slurm_order).
    A Prolog has these (and no CUDA_VISIBLE_DEVICES that CUDA would read as indices); None when unset or when an ID
    is past the GPUs NVML lists."""
    ids = facts.env("SLURM_STEP_GPUS") or facts.env("SLURM_JOB_GPUS")
    if not ids:
        return None
    listed, assumption = _slurm_order(facts, gpus)
    entries = [entry.strip() for entry in ids.split(",")]
    if not all(entry.isdigit() and int(entry) < len(listed) for entry in entries):
        return None
    return _enumerated(facts, [listed[int(entry)] for entry in entries], "slurm_gpus", assumption)


def _enumerated(facts, gpus: list, basis: str, assumption: Optional[str] = None) -> JobGpus:
    """What CUDA enumerates of `gpus` with no CUDA_VISIBLE_DEVICES, saying which MIG devices it leaves out."""
    driver = facts.get("nvml.driver_version", None)
    everything = [device for gpu in usable_gpus(gpus) for device in _as_cuda_sees(gpu)]
    return JobGpus(cuda_devices(gpus, driver), basis, _mig_assumption(assumption, everything, driver, "in PCI order"))


def job_gpus(facts) -> JobGpus:
    """The NVML devices the job's CUDA will use, and how they were matched (`counted` False where a report named
    one GPU without saying how many); worked out once per snapshot, for the several rules that ask (Facts.once)."""
    return facts.once(_counted_job_gpus)


def _counted_job_gpus(facts) -> JobGpus:
    job = _job_gpus(facts)
    if facts.get("nvml.gpus_counted", None) is False and job.basis != "none":
        return JobGpus(job.devices, job.basis, job.assumption, counted=False)
    return job


def _job_gpus(facts) -> JobGpus:
    gpus = facts.get("nvml.gpus", None) or []
    visible = facts.env("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in HIDES_ALL:
        return JobGpus([], "none")
    matched = _from_torch(facts, gpus)
    if matched is not None:
        return matched
    matched = _from_slurm(facts, gpus)
    if matched is not None:
        return matched
    if visible is not None:
        return _from_visible(facts, visible, gpus)
    runtime = [e.strip() for e in (facts.env("NVIDIA_VISIBLE_DEVICES") or "").split(",") if e.strip()]
    if runtime and all(e.startswith(("GPU-", "MIG-")) for e in runtime):
        named, _assumption = _named(facts, ",".join(runtime), gpus)
        if len(named) == len(runtime):  # the container runtime's selection (Kubernetes' device plugin)
            return _from_visible(facts, ",".join(runtime), gpus, "nvidia_visible_devices")
    return _enumerated(facts, gpus, "all", _torch_without_uuids(facts))
