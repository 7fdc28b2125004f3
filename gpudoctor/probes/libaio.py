"""Where libaio is on this machine (DeepSpeed's async_io op, NVMe offload: GD308). Files only, no subprocess.

DeepSpeed's AsyncIOBuilder.is_compatible compiles and links a test program with `-laio` (the unversioned
`libaio.so` from libaio-dev / libaio-devel) and the op includes `libaio.h`; a pre-built op needs only the runtime
library (`libaio.so.1`, `libaio.so.1t64` on Ubuntu 24.04). Looked for in the directories the linker and the
compiler search: ld.so.conf(.d), the usual and multiarch lib dirs, LD_LIBRARY_PATH, LIBRARY_PATH, `-L` in LDFLAGS,
$CONDA_PREFIX/lib, and for the header /usr/include, /usr/local/include, CPATH, C_INCLUDE_PATH, `-I` in CFLAGS,
$CONDA_PREFIX/include.
"""

from __future__ import annotations

import glob
import os
import shlex
from typing import Dict, List, Mapping, Optional

LIB_DIRS = ("/usr/local/lib64", "/usr/local/lib", "/usr/lib64", "/usr/lib", "/lib64", "/lib")
INCLUDE_DIRS = ("/usr/local/include", "/usr/include")
LD_SO_CONF = "/etc/ld.so.conf"


def _flag_dirs(value: str, flag: str) -> List[str]:
    try:
        words = shlex.split(value or "")
    except ValueError:
        words = (value or "").split()
    found = []
    for index, word in enumerate(words):
        if word == flag and index + 1 < len(words):
            found.append(words[index + 1])
        elif word.startswith(flag) and len(word) > len(flag):
            found.append(word[len(flag):])
    return found


def _ld_so_conf(path: str = LD_SO_CONF, depth: int = 0) -> List[str]:
    """Directories listed in ld.so.conf, following `include` lines (globs) a few levels deep."""
    if depth > 3:
        return []
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read(100_000).splitlines()
    except OSError:
        return []
    dirs: List[str] = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line.startswith("include "):
            pattern = line.split(None, 1)[1]
            if not os.path.isabs(pattern):
                pattern = os.path.join(os.path.dirname(path), pattern)
            for included in sorted(glob.glob(pattern))[:100]:
                dirs.extend(_ld_so_conf(included, depth + 1))
        elif line.startswith("/"):
            dirs.append(line)
    return dirs


def library_dirs(environ: Mapping[str, str]) -> List[str]:
    machine = (os.uname().machine if hasattr(os, "uname") else "") or "x86_64"
    multiarch = [f"/usr/lib/{machine}-linux-gnu", f"/lib/{machine}-linux-gnu"]
    dirs = []
    for name in ("LD_LIBRARY_PATH", "LIBRARY_PATH"):
        dirs.extend(environ.get(name, "").split(os.pathsep))
    dirs.extend(_flag_dirs(environ.get("LDFLAGS", ""), "-L"))
    if environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(environ["CONDA_PREFIX"], "lib"))
    dirs.extend(_ld_so_conf())
    dirs.extend(multiarch)
    dirs.extend(LIB_DIRS)
    return _unique(dirs)


def include_dirs(environ: Mapping[str, str]) -> List[str]:
    dirs = []
    for name in ("CPATH", "C_INCLUDE_PATH"):
        dirs.extend(environ.get(name, "").split(os.pathsep))
    dirs.extend(_flag_dirs(environ.get("CFLAGS", ""), "-I"))
    if environ.get("CONDA_PREFIX"):
        dirs.append(os.path.join(environ["CONDA_PREFIX"], "include"))
    dirs.extend(INCLUDE_DIRS)
    return _unique(dirs)


def _unique(dirs: List[str]) -> List[str]:
    seen, result = set(), []
    for item in dirs:
        if item and item not in seen:
            seen.add(item)
            result.append(item)
    return result


def _libaio_names(folder: str) -> List[str]:
    """The names in `folder` that `libaio.so*` matches, sorted: one listing, compared as strings (glob would match
    each of a lib folder's thousands of names against a regular expression)."""
    try:
        return sorted(name for name in os.listdir(folder) if name.startswith("libaio.so"))
    except OSError:  # missing, not a folder, unreadable: glob finds nothing there either
        return []


def find(environ: Mapping[str, str]) -> Dict[str, Optional[str]]:
    """{"library": runtime .so or None, "dev_library": libaio.so or None, "header": libaio.h or None}."""
    runtime = dev = None
    for folder in library_dirs(environ):
        for name in _libaio_names(folder):
            path = os.path.join(folder, name)
            if name == "libaio.so":
                dev = dev or path
            else:
                runtime = runtime or path
        if runtime and dev:
            break
    header = next((os.path.join(folder, "libaio.h") for folder in include_dirs(environ)
                   if os.path.isfile(os.path.join(folder, "libaio.h"))), None)
    return {"library": runtime or dev, "dev_library": dev, "header": header}
