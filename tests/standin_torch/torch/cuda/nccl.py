from torch._spec import SPEC


def version():
    """torch/csrc/cuda/nccl.cpp `version()`: NCCL_MAJOR/MINOR/PATCH of the header torch was built with."""
    return tuple(SPEC.get("nccl", (2, 21, 5)))
