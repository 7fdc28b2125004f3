"""torch.cuda as torch 2.x implements the parts the probe uses (torch/cuda/__init__.py): before CUDA initialises,
device_count() is NVML's count of the GPUs CUDA_VISIBLE_DEVICES names (`_device_count_nvml`, pytorch#83973), and
-1 from it (a MIG UUID first) falls back to CUDA's; after, CUDA's own count. get_device_properties() initialises
CUDA and asserts the index is below device_count()."""
import os
from collections import namedtuple

from torch._spec import SPEC
from torch.cuda import nccl  # noqa: F401

_initialized = False
Properties = namedtuple("Properties", "name major minor total_memory uuid")


def _cuda_get_device_count():
    """torch._C._cuda_getDeviceCount(): CUDA's count, 0 where CUDA cannot initialise."""
    return 0 if SPEC.get("init_error") else len(SPEC.get("devices", []))


def _device_count_nvml():
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = int(SPEC.get("nvml_count", len(SPEC.get("devices", []))))
    if visible is None:
        return count
    entries = [entry.strip() for entry in visible.split(",")]
    if entries and entries[0].startswith("MIG-"):
        return -1  # "Skip MIG parsing"
    for index, entry in enumerate(entries):
        if not entry.isdigit() or int(entry) >= count:
            return index
    return len(entries)


def is_available():
    return _cuda_get_device_count() > 0


def device_count():
    if _initialized:
        return _cuda_get_device_count()
    nvml_count = _device_count_nvml()
    return _cuda_get_device_count() if nvml_count < 0 else nvml_count


def init():
    global _initialized
    if SPEC.get("init_error"):
        raise RuntimeError(SPEC["init_error"])
    _initialized = True


def get_arch_list():
    return ["sm_80", "sm_90"]


def get_device_properties(device):
    init()
    if device < 0 or device >= device_count():
        raise AssertionError("Invalid device id")
    found = SPEC["devices"][device]
    return Properties(found["name"], found["major"], found["minor"], found["total_memory"], found.get("uuid"))
