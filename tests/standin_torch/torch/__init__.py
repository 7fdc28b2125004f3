"""A stand-in torch (see _spec.py)."""
import ctypes

from torch import backends, cuda, version  # noqa: F401
from torch._spec import SPEC

__version__ = SPEC.get("version", "2.5.1+cu124")
if SPEC.get("nccl_library"):  # torch/__init__.py's _load_global_deps: the CUDA libraries load at import
    _NCCL = ctypes.CDLL(SPEC["nccl_library"], mode=ctypes.RTLD_GLOBAL)
