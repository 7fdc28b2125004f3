"""Look-ups in the knowledge tables of `rules/` (CUDA↔driver, GPUs, torch wheel arch lists)."""

from __future__ import annotations

import re
from functools import cache, total_ordering
from typing import Optional

from gpudoctor.data import load_toml, rules_dir
from gpudoctor.units import GiB

# The launchers that start every process with RANK, LOCAL_RANK and WORLD_SIZE in its environment: torchrun's
# elastic agent and those built on it (torch/distributed/run.py; deepspeed's launcher, accelerate launch).
SETS_LOCAL_RANK_ENV = frozenset({"torchrun", "torch.distributed.launch", "deepspeed", "accelerate"})


@total_ordering
class Release:
    """A release number ('535.104.05', '12.4'): compared as packaging.version compares a bare release (numbers
    part by part, trailing zeros ignored: PEP 440), printed as written (a driver is 580.65.06, never 580.65.6).
    `version()` reads only digits and dots, so this needs no parser: gpudoctor runs where `packaging` is absent
    (a GPU node's python with only torch's dependencies)."""

    __slots__ = ("release", "text")

    def __init__(self, text: str):
        self.text = text
        self.release = tuple(int(part) for part in text.split("."))

    def _key(self) -> tuple:
        key = self.release
        while len(key) > 1 and key[-1] == 0:
            key = key[:-1]
        return key

    def __eq__(self, other) -> bool:
        return isinstance(other, Release) and self._key() == other._key()

    def __lt__(self, other: Release) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"<Release {self.text!r}>"

    @property
    def major(self) -> int:
        return self.release[0]

    @property
    def minor(self) -> int:
        return self.release[1] if len(self.release) > 1 else 0

    @property
    def micro(self) -> int:
        return self.release[2] if len(self.release) > 2 else 0


def version(text) -> Optional[Release]:
    """A comparable version from strings like '535.104.05', '12.4', '2.5.1+cu124' (its release: the leading
    numbers); None if unparsable."""
    if text is None:
        return None
    match = re.match(r"\s*(\d+(?:\.\d+)*)", str(text))
    return Release(match.group(1)) if match else None


_MAJOR_MINOR = re.compile(r"\s*v?(\d+)(?:\.(\d+))?")


def major_minor(text) -> Optional[str]:
    """'12.4' from '12.4.131', 'v12.4' or '12.04'; '12' from '12' (a minor nobody stated is never made up);
    None when the text does not start with a version."""
    match = _MAJOR_MINOR.match(str(text)) if text is not None else None
    if not match:
        return None
    major, minor = int(match.group(1)), match.group(2)
    return f"{major}.{int(minor)}" if minor is not None else str(major)


@cache
def table(name: str) -> dict:
    return load_toml(rules_dir() / f"{name}.toml")


# --- CUDA toolkit <-> driver -------------------------------------------------------------------------

def min_driver(cuda: str) -> Optional[Release]:
    """The lowest Linux driver that supports CUDA major.minor (its GA release), or None if unknown."""
    wanted = major_minor(cuda)
    found = [version(row["linux_min_driver"]) for row in table("cuda_driver").get("toolkit", [])
             if major_minor(row["version"]) == wanted and row.get("linux_min_driver")]
    drivers = [d for d in found if d is not None]
    return min(drivers) if drivers else None


def driver_max_cuda(driver: Optional[str]) -> Optional[Release]:
    """The newest CUDA major.minor whose GA driver is <= this driver (what `nvidia-smi` shows as CUDA Version)."""
    have = version(driver)
    if have is None:
        return None
    best = None
    for row in table("cuda_driver").get("toolkit", []):
        needed = version(row.get("linux_min_driver"))
        cuda = version(major_minor(row["version"]))
        if needed is not None and cuda is not None and needed <= have and (best is None or cuda > best):
            best = cuda
    return best


def mvc_floor(major: int) -> Optional[Release]:
    """Minimum driver for CUDA minor-version compatibility within `major`; None where MVC does not exist."""
    for row in table("cuda_driver").get("mvc", []):
        if int(row["major"]) == major:
            return version(row["min_driver"])
    return None


# --- GPUs ----------------------------------------------------------------------------------------------

def gpu_spec(name: str) -> Optional[dict]:
    """The gpus.toml entry whose longest `match` substring occurs in the GPU name (case-insensitive)."""
    lowered = (name or "").lower()
    best, best_len = None, 0
    for entry in table("gpus").get("gpu", []):
        for needle in entry.get("match", []):
            if needle.lower() in lowered and len(needle) > best_len:
                best, best_len = entry, len(needle)
    return best


_NOISE = {"nvidia", "geforce", "tesla", "quadro", "gpu", "generation", "hbm3", "hbm3e", "gb", "per"}


def _name_tokens(text: str) -> set:
    """`A100-SXM4-80GB` → {a100, sxm, 80gb}: model words, form factor without its generation, memory in GB."""
    text = re.sub(r"(\d+)\s*(?:gb|gib|g)\b", r" \1gb ", (text or "").lower())
    text = re.sub(r"sxm\d", "sxm", text)
    text = re.sub(r"\b([a-z]{3,})(\d)", r"\1 \2", text)  # rtx4090 → rtx 4090; a100, gb200 stay whole
    return set(re.findall(r"[a-z]*\d+[a-z]*|[a-z]+", text)) - _NOISE


class AmbiguousGpu(ValueError):
    """A GPU name that fits several table entries of different memory."""


def gpu_by_user_name(name: str) -> Optional[dict]:
    """The gpus.toml entry a person means by `name` ("A100 40GB", "a100-80g", "H100 SXM", "4090", or NVML's
    name): the entry whose words include every word of `name` with the fewest others (the table's order breaks
    ties). Raises AmbiguousGpu when the closest entries differ in memory ("A100": 40 or 80 GB)."""
    wanted = _name_tokens(name)
    if not wanted:
        return None
    scored = []
    for entry in table("gpus").get("gpu", []):
        have = set().union(*(_name_tokens(text) for text in [entry["name"], *entry.get("match", [])]))
        if wanted <= have:
            scored.append((len(have - wanted), entry))
    if not scored:
        return None
    fewest = min(extra for extra, _ in scored)
    closest = [entry for extra, entry in scored if extra == fewest]
    if len({entry.get("memory_gib") for entry in closest}) > 1:
        raise AmbiguousGpu(", ".join(entry["name"] for entry in closest))
    return closest[0]


_CC = re.compile(r"\d+\.\d+")


def gpu_cc(gpu: dict) -> Optional[str]:
    """A GPU's compute capability (`8.6`): as reported, else from the table by name (a recorded snapshot's `N/A` is
    not one)."""
    if _CC.fullmatch(str(gpu.get("cc") or "")):
        return str(gpu["cc"])
    spec = gpu_spec(gpu.get("name", ""))
    return str(spec["cc"]) if spec else None


def gpu_memory_bytes(gpu: dict) -> Optional[int]:
    """A GPU's memory: as the device reported it, else the table's reported total for its model, else the
    marketed size (a little more than the device shows where the driver reserves some)."""
    if gpu.get("memory_total_bytes"):
        return int(gpu["memory_total_bytes"])
    spec = gpu_spec(gpu.get("name", ""))
    return table_memory_bytes(spec) if spec else None


def table_memory_bytes(spec: dict) -> Optional[int]:
    """A gpus.toml entry's memory in bytes: `memory_reported_mib` where it was read, else `memory_gib`."""
    if spec.get("memory_reported_mib"):
        return int(spec["memory_reported_mib"]) * 2**20
    return int(float(spec["memory_gib"]) * GiB) if spec.get("memory_gib") else None


# --- torch wheels --------------------------------------------------------------------------------------

def wheel_archs(torch_version: str, cuda: str) -> Optional[dict]:
    """The `[[wheel]]` row of the official x86_64 wheel for this torch release and CUDA (`archs`: SASS, `ptx`,
    `status`, `source`), if the table has one. Only what a row's sources verify may decide a rule: all of a
    `status = "verified"` row, else the cells its `verified` names."""
    release, wanted = version(major_minor(torch_version)), major_minor(cuda)
    if release is None or wanted is None:
        return None
    for row in table("torch_wheels").get("wheel", []):
        if major_minor(row["cuda"]) != wanted:
            continue
        low, high = version(row.get("torch_min")), version(row.get("torch_max"))
        if (low is None or release >= low) and (high is None or release <= high):
            return row
    return None


def companion(name: str, release: str) -> Optional[str]:
    """The major.minor of `name` (torchvision, torchaudio) built for torch `release` (major.minor), from
    `[[companion]]` of rules/torch_wheels.toml; None where the table does not say."""
    for row in table("torch_wheels").get("companion", []):
        if row["torch"] == major_minor(release):
            return row.get(name)
    return None


def releases_with_wheel(cuda: str) -> list:
    """The torch releases (major.minor, oldest first) that publish a Linux x86_64 wheel for CUDA major.minor on
    download.pytorch.org (`[[release]]` of rules/torch_wheels.toml)."""
    wanted = major_minor(cuda)
    found = [row["torch"] for row in table("torch_wheels").get("release", [])
             if wanted in {major_minor(c) for c in row.get("cuda", [])}]
    return sorted(found, key=Release)

