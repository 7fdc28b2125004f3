from torch._spec import SPEC

__version__ = SPEC.get("version", "2.5.1+cu124")
cuda = SPEC.get("cuda", "12.4")
hip = None
