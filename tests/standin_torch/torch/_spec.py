"""The node this stand-in torch runs on, from the JSON file named by STANDIN_TORCH:

    version ("2.5.1+cu124"), cuda ("12.4"), nvml_count (the GPUs NVML counts: what torch's device_count() returns
    before CUDA initialises), devices (CUDA's own devices after initialisation: [{name, uuid, major, minor,
    total_memory}]), init_error (the RuntimeError CUDA's initialisation raises), nccl (the compiled NCCL, [2, 21, 5]),
    nccl_library (a shared library this torch loads as libnccl.so.2 at import, as torch wheels do).
"""
import json
import os

with open(os.environ["STANDIN_TORCH"]) as handle:
    SPEC = json.load(handle)
