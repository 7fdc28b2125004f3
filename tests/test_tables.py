"""Checks for the knowledge tables in rules/*.toml (cuda_driver, gpus, torch_wheels).

Structure (required keys, types, version strings), internal consistency (flags vs compute capability,
version ranges), coverage (every CUDA major.minor 9.0 ... 13.3 that exists) and a few spot facts.
The GPU-name resolver below is a test-only reimplementation of the lookup rule the code uses:
case-insensitive substring match, longest matching substring over all entries wins.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from packaging.version import Version

from gpudoctor.data import load_toml

RULES = Path(__file__).resolve().parent.parent / "rules"
STATUSES = {"verified", "partly verified", "unverified"}
MAJOR_MINOR = re.compile(r"^\d+\.\d+$")
CC_RE = re.compile(r"^\d{1,2}\.\d$")


def load(name: str) -> dict:
    return load_toml(RULES / name)


@pytest.fixture(scope="module")
def cuda() -> dict:
    return load("cuda_driver.toml")


@pytest.fixture(scope="module")
def gpus() -> dict:
    return load("gpus.toml")


@pytest.fixture(scope="module")
def wheels() -> dict:
    return load("torch_wheels.toml")


def check_keys(row: dict, required: dict, optional: dict, where: str) -> None:
    """required/optional map key -> type (or tuple of types)."""
    for key, typ in required.items():
        assert key in row, f"{where}: missing {key!r}"
        assert isinstance(row[key], typ), f"{where}: {key!r} should be {typ}, got {type(row[key])}"
    for key, typ in optional.items():
        if key in row:
            assert isinstance(row[key], typ), f"{where}: {key!r} should be {typ}, got {type(row[key])}"
    unknown = set(row) - set(required) - set(optional)
    assert not unknown, f"{where}: unknown keys {sorted(unknown)}"
    assert row["status"] in STATUSES, f"{where}: bad status {row['status']!r}"
    assert row["source"].strip(), f"{where}: empty source"


def cc_tuple(cc: str) -> tuple[int, int]:
    major, minor = cc.split(".")
    return int(major), int(minor)


# ====================================================================== cuda_driver.toml

TOOLKIT_REQ = {"version": str, "linux_min_driver": str, "source": str, "status": str}
TOOLKIT_OPT = {"update": str, "windows_min_driver": str, "bundled_driver": str, "note": str}
MVC_REQ = {"major": int, "min_driver": str, "source": str, "status": str}
MVC_OPT = {"windows_min_driver": str, "min_branch": int, "max_driver_branch_below": str, "note": str}

EXISTING_CUDA = (
    ["9.0", "9.1", "9.2", "10.0", "10.1", "10.2"]
    + [f"11.{m}" for m in range(0, 9)]
    + [f"12.{m}" for m in range(0, 7)] + ["12.8", "12.9"]
    + [f"13.{m}" for m in range(0, 4)]
)


def ga_minimums(cuda: dict) -> dict[str, Version]:
    """major.minor -> lowest linux_min_driver over its rows (the rules' notion of that minor's minimum)."""
    out: dict[str, Version] = {}
    for row in cuda["toolkit"]:
        drv = Version(row["linux_min_driver"])
        if row["version"] not in out or drv < out[row["version"]]:
            out[row["version"]] = drv
    return out


def test_toolkit_rows_structure(cuda):
    assert cuda["toolkit"], "no [[toolkit]] rows"
    for i, row in enumerate(cuda["toolkit"]):
        where = f"toolkit[{i}] {row.get('update', row.get('version'))}"
        check_keys(row, TOOLKIT_REQ, TOOLKIT_OPT, where)
        assert MAJOR_MINOR.match(row["version"]), where
        Version(row["version"])
        for key in ("linux_min_driver", "windows_min_driver", "bundled_driver"):
            if key in row:
                Version(row[key])
        if "update" in row:
            upd = Version(row["update"])
            assert row["update"].startswith(row["version"] + "."), where
            assert len(upd.release) == 3, where


def test_every_existing_cuda_minor_has_a_row_and_no_12_7(cuda):
    present = {row["version"] for row in cuda["toolkit"]}
    assert "12.7" not in present
    assert present == set(EXISTING_CUDA), (
        f"missing {sorted(set(EXISTING_CUDA) - present, key=Version)}, "
        f"extra {sorted(present - set(EXISTING_CUDA), key=Version)}"
    )


def test_toolkit_rows_unique_and_ordered(cuda):
    updates = [row.get("update", row["version"]) for row in cuda["toolkit"]]
    assert len(updates) == len(set(updates)), "duplicate toolkit update"
    assert [Version(u) for u in updates] == sorted(Version(u) for u in updates), "rows not in version order"
    # within a minor, later updates never need an older driver
    by_minor: dict[str, list[dict]] = {}
    for row in cuda["toolkit"]:
        by_minor.setdefault(row["version"], []).append(row)
    for minor, rows in by_minor.items():
        for key in ("linux_min_driver", "windows_min_driver"):
            vals = [Version(r[key]) for r in rows if key in r]
            assert vals == sorted(vals), f"{minor}: {key} decreases across updates"


def test_ga_minimum_spot_values(cuda):
    ga = ga_minimums(cuda)
    expected = {
        "9.0": "384.81", "9.2": "396.26", "10.0": "410.48", "10.1": "418.39", "10.2": "440.33",
        "11.0": "450.51.05", "11.8": "520.61.05", "12.0": "525.60.13", "12.4": "550.54.14",
        "12.8": "570.26", "12.9": "575.51.03", "13.0": "580.65.06", "13.3": "610.43.02",
    }
    for minor, drv in expected.items():
        assert ga[minor] == Version(drv), f"{minor}: {ga[minor]} != {drv}"


def test_ga_minimums_increase_with_toolkit(cuda):
    ga = ga_minimums(cuda)
    ordered = sorted(ga, key=Version)
    for prev, cur in zip(ordered, ordered[1:]):
        assert ga[cur] > ga[prev], f"{cur} minimum {ga[cur]} not above {prev} minimum {ga[prev]}"


def test_cuda_10_1_updates(cuda):
    rows = {r["update"]: r for r in cuda["toolkit"] if r["version"] == "10.1"}
    assert rows["10.1.105"]["linux_min_driver"] == "418.39"
    assert rows["10.1.168"]["bundled_driver"] == "418.67"
    assert rows["10.1.243"]["bundled_driver"] == "418.87.00"


def test_windows_driver_absent_for_cuda_13(cuda):
    for row in cuda["toolkit"]:
        if row["version"].startswith("13."):
            assert "windows_min_driver" not in row
    row_124 = next(r for r in cuda["toolkit"] if r.get("update") == "12.4.0")
    assert row_124["windows_min_driver"] == "551.61"


def test_mvc_rows(cuda):
    rows = {}
    for i, row in enumerate(cuda["mvc"]):
        check_keys(row, MVC_REQ, MVC_OPT, f"mvc[{i}]")
        Version(row["min_driver"])
        rows[row["major"]] = row
    assert set(rows) == {11, 12, 13}
    assert rows[11]["min_driver"] == "450.80.02"
    assert rows[12]["min_driver"] == "525.60.13"
    assert rows[13]["min_driver"] == "580.65.06"
    assert rows[11]["max_driver_branch_below"] == str(rows[12]["min_branch"])
    assert rows[12]["max_driver_branch_below"] == str(rows[13]["min_branch"])
    ga = ga_minimums(cuda)
    for major, row in rows.items():
        floor = Version(row["min_driver"])
        assert floor.release[0] == row["min_branch"]
        # the floor is never above the GA minimum of any minor after x.0
        for minor, drv in ga.items():
            if Version(minor).major == major and Version(minor).minor >= 1:
                assert floor <= drv, f"MVC {major} floor {floor} above {minor} GA {drv}"
    # for 12 and 13 the floor is the x.0 GA driver
    assert Version(rows[12]["min_driver"]) == ga["12.0"]
    assert Version(rows[13]["min_driver"]) == ga["13.0"]


# ====================================================================== gpus.toml

GPU_REQ = {
    "name": str, "match": list, "cc": str, "arch": str, "bf16": bool, "fp8": bool, "tf32": bool,
    "nvlink": str, "p2p_consumer": bool, "source": str, "status": str,
}
GPU_OPT = {
    "memory_gib": (int, float), "memory_reported_mib": int, "bf16_dense_tflops": (int, float),
    "nvlink_gbps": (int, float),
    "nvlink_bridge": bool, "note": str,
}
ARCH_REQ = {
    "cc": str, "arch": str, "fp16_tensor": bool, "bf16": bool, "tf32": bool, "fp8": bool, "fp4": bool,
    "source": str, "status": str,
}
ARCH_OPT = {"cuda_min": str, "cuda_max": str, "note": str}
ARCH_NAMES = {"Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell"}


def resolve_all(gpus: dict, device_name: str) -> list[dict]:
    """Entries whose longest matching substring is the overall longest (ties -> several entries)."""
    low = device_name.lower()
    best, winners = 0, []
    for entry in gpus["gpu"]:
        length = max((len(m) for m in entry["match"] if m.lower() in low), default=0)
        if length == 0:
            continue
        if length > best:
            best, winners = length, [entry]
        elif length == best:
            winners.append(entry)
    return winners


def resolve(gpus: dict, device_name: str) -> dict | None:
    winners = resolve_all(gpus, device_name)
    assert len(winners) <= 1, f"{device_name!r} ties between {[w['name'] for w in winners]}"
    return winners[0] if winners else None


def by_name(gpus: dict, name: str) -> dict:
    matches = [g for g in gpus["gpu"] if g["name"] == name]
    assert len(matches) == 1, name
    return matches[0]


def test_gpu_rows_structure(gpus):
    assert len(gpus["gpu"]) >= 60
    for i, g in enumerate(gpus["gpu"]):
        where = f"gpu[{i}] {g.get('name')}"
        check_keys(g, GPU_REQ, GPU_OPT, where)
        assert g["match"] and all(isinstance(m, str) and m.strip() == m and len(m) >= 4 for m in g["match"]), where
        assert CC_RE.match(g["cc"]), where
        Version(g["cc"])
        assert g["arch"] in ARCH_NAMES, where
        assert g["nvlink"] == "none" or re.fullmatch(r"NVLink[1-5]", g["nvlink"]), where
        assert ("nvlink_gbps" in g) == (g["nvlink"] != "none"), f"{where}: nvlink_gbps iff NVLink"
        if "nvlink_bridge" in g:
            assert g["nvlink"] != "none", where
        for key in ("memory_gib", "bf16_dense_tflops", "nvlink_gbps"):
            if key in g:
                assert not isinstance(g[key], bool) and g[key] > 0, where


def test_gpu_flags_follow_cc(gpus):
    for g in gpus["gpu"]:
        cc = cc_tuple(g["cc"])
        assert g["bf16"] == (cc >= (8, 0)), g["name"]
        assert g["tf32"] == (cc >= (8, 0)), g["name"]
        assert g["fp8"] == (cc >= (8, 9)), g["name"]
        if "bf16_dense_tflops" in g:
            assert g["bf16"], f"{g['name']}: bf16 TFLOPS on a GPU without bf16"


def test_gpu_names_and_match_strings_unique(gpus):
    names = [g["name"] for g in gpus["gpu"]]
    assert len(names) == len(set(names))
    seen: dict[str, str] = {}
    for g in gpus["gpu"]:
        for m in g["match"]:
            key = m.lower()
            assert key not in seen, f"match {m!r} used by {seen[key]!r} and {g['name']!r}"
            seen[key] = g["name"]


def test_every_match_string_resolves_to_its_own_entry(gpus):
    for g in gpus["gpu"]:
        for m in g["match"]:
            got = resolve(gpus, m)
            assert got is not None and got["name"] == g["name"], f"{m!r} -> {got and got['name']}"


EXAMPLES = {
    # the brief's examples
    "NVIDIA H100 80GB HBM3": "NVIDIA H100 SXM5",
    "Tesla V100-SXM2-32GB": "Tesla V100 SXM2 32GB",
    "NVIDIA GeForce RTX 4090": "GeForce RTX 4090",
    "NVIDIA RTX 6000 Ada Generation": "NVIDIA RTX 6000 Ada Generation",
    "Tesla T4": "Tesla T4",
    "NVIDIA A100-SXM4-80GB": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A100 80GB PCIe": "NVIDIA A100 PCIe 80GB",
    "Quadro RTX 6000": "Quadro RTX 6000",
    # most-specific-first traps
    "NVIDIA A100-SXM4-40GB": "NVIDIA A100 SXM4 40GB",
    "NVIDIA A100-PCIE-40GB": "NVIDIA A100 PCIe 40GB",
    "NVIDIA A100 80GB PCIe MIG 1g.10gb": "NVIDIA A100 PCIe 80GB",
    "NVIDIA A100-SXM4-80GB MIG 3g.40gb": "NVIDIA A100 SXM4 80GB",
    "NVIDIA A10": "NVIDIA A10",
    "NVIDIA A10G": "NVIDIA A10G (AWS)",
    "NVIDIA A30": "NVIDIA A30",
    "NVIDIA A40": "NVIDIA A40",
    "NVIDIA A800-SXM4-80GB": "NVIDIA A800 SXM4 80GB",
    "NVIDIA A800 80GB PCIe": "NVIDIA A800 PCIe 80GB",
    "NVIDIA H100 PCIe": "NVIDIA H100 PCIe",
    "NVIDIA H100 NVL": "NVIDIA H100 NVL",
    "NVIDIA H800": "NVIDIA H800",
    "NVIDIA H20": "NVIDIA H20",
    "NVIDIA H200": "NVIDIA H200 SXM",
    "NVIDIA H200 NVL": "NVIDIA H200 NVL",
    "NVIDIA GH200 480GB": "NVIDIA GH200 (96 GB HBM3)",
    "NVIDIA GH200 144G HBM3e": "NVIDIA GH200 (144 GB HBM3e)",
    "NVIDIA B200": "NVIDIA B200",
    "NVIDIA GB200": "NVIDIA GB200 (per GPU)",
    "NVIDIA B300 SXM6 AC": "NVIDIA B300",
    "NVIDIA B300 MIG 34GB": "NVIDIA B300",
    "NVIDIA GB300": "NVIDIA GB300 (per GPU)",
    "NVIDIA L4": "NVIDIA L4",
    "NVIDIA L40": "NVIDIA L40",
    "NVIDIA L40S": "NVIDIA L40S",
    "Tesla V100-SXM2-16GB": "Tesla V100 SXM2 16GB",
    "Tesla V100-PCIE-32GB": "Tesla V100 PCIe 32GB",
    "Tesla V100-PCIE-16GB": "Tesla V100 PCIe 16GB",
    "Tesla V100S-PCIE-32GB": "Tesla V100S PCIe 32GB",
    "Tesla V100-SXM3-32GB": "Tesla V100 SXM2 32GB",
    "Quadro RTX 8000": "Quadro RTX 8000",
    "NVIDIA TITAN V": "TITAN V",
    "NVIDIA TITAN RTX": "TITAN RTX",
    "NVIDIA GeForce RTX 2080 Ti": "GeForce RTX 2080 Ti",
    "NVIDIA GeForce RTX 2080 SUPER": "GeForce RTX 2080",
    "NVIDIA RTX A4000": "NVIDIA RTX A4000",
    "NVIDIA RTX A5000": "NVIDIA RTX A5000",
    "NVIDIA RTX A6000": "NVIDIA RTX A6000",
    "NVIDIA GeForce RTX 3060": "GeForce RTX 3060",
    "NVIDIA GeForce RTX 3060 Laptop GPU": "GeForce RTX 3060",
    "NVIDIA GeForce RTX 3060 Ti": "GeForce RTX 3060 Ti",
    "NVIDIA GeForce RTX 3070 Ti Laptop GPU": "GeForce RTX 3070 Ti",
    "NVIDIA GeForce RTX 3080": "GeForce RTX 3080",
    "NVIDIA GeForce RTX 3090": "GeForce RTX 3090",
    "NVIDIA GeForce RTX 3090 Ti": "GeForce RTX 3090 Ti",
    "NVIDIA RTX 4000 SFF Ada Generation": "NVIDIA RTX 4000 SFF Ada Generation",
    "NVIDIA RTX 4000 Ada Generation": "NVIDIA RTX 4000 Ada Generation",
    "NVIDIA GeForce RTX 4060": "GeForce RTX 4060",
    "NVIDIA GeForce RTX 4060 Ti": "GeForce RTX 4060 Ti",
    "NVIDIA GeForce RTX 4070 SUPER": "GeForce RTX 4070 SUPER",
    "NVIDIA GeForce RTX 4070 Ti": "GeForce RTX 4070 Ti",
    "NVIDIA GeForce RTX 4070 Ti SUPER": "GeForce RTX 4070 Ti SUPER",
    "NVIDIA GeForce RTX 4080 SUPER": "GeForce RTX 4080 SUPER",
    "NVIDIA GeForce RTX 4090 D": "GeForce RTX 4090",
    "NVIDIA GeForce RTX 5090": "GeForce RTX 5090",
    "NVIDIA GeForce RTX 5080": "GeForce RTX 5080",
    "NVIDIA RTX PRO 6000 Blackwell Workstation Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "NVIDIA RTX PRO 6000 Blackwell",
    "NVIDIA GB10": "NVIDIA GB10 (DGX Spark)",
    "Orin (nvgpu)": "NVIDIA Jetson Orin",
    "Tesla K80": "Tesla K80",
    "Tesla P100-PCIE-16GB": "Tesla P100 PCIe 16GB",
    "Tesla P100-PCIE-12GB": "Tesla P100 PCIe 12GB",
    "Tesla P100-SXM2-16GB": "Tesla P100 SXM2",
    "Tesla P40": "Tesla P40",
    "Tesla P4": "Tesla P4",
    "GeForce GTX 1080": "GeForce GTX 1080",
    "NVIDIA GeForce GTX 1080 Ti": "GeForce GTX 1080 Ti",
    # case-insensitive
    "nvidia h100 80gb hbm3": "NVIDIA H100 SXM5",
    "QUADRO RTX 6000": "Quadro RTX 6000",
}

UNKNOWN_NAMES = [
    "NVIDIA RTX A3000 Laptop GPU",  # must not hit "A30"
    "NVIDIA GeForce GTX 1650",
    "AMD Instinct MI300X",
    "Intel(R) Data Center GPU Max 1550",
]


@pytest.mark.parametrize("device_name,expected", sorted(EXAMPLES.items()))
def test_resolver_examples(gpus, device_name, expected):
    got = resolve(gpus, device_name)
    assert got is not None, f"{device_name!r} resolved to nothing"
    assert got["name"] == expected, f"{device_name!r} -> {got['name']!r}, expected {expected!r}"


@pytest.mark.parametrize("device_name", UNKNOWN_NAMES)
def test_resolver_unknown_names(gpus, device_name):
    assert resolve(gpus, device_name) is None


def test_gpu_spot_facts(gpus):
    t4 = resolve(gpus, "Tesla T4")
    assert t4["cc"] == "7.5" and t4["bf16"] is False and t4["arch"] == "Turing"
    ada = resolve(gpus, "NVIDIA RTX 6000 Ada Generation")
    assert ada["cc"] == "8.9" and ada["fp8"] is True and ada["arch"] == "Ada Lovelace"
    quadro = resolve(gpus, "Quadro RTX 6000")
    assert quadro["cc"] == "7.5" and quadro["fp8"] is False
    for g in gpus["gpu"]:
        if "V100" in g["name"] or g["name"] == "TITAN V":
            assert g["cc"] == "7.0" and g["bf16"] is False, g["name"]
    h100 = resolve(gpus, "NVIDIA H100 80GB HBM3")
    assert h100["cc"] == "9.0" and h100["bf16_dense_tflops"] == 989.4 and h100["nvlink_gbps"] == 900
    assert resolve(gpus, "NVIDIA A100-SXM4-80GB")["memory_gib"] == 80
    assert resolve(gpus, "NVIDIA A100-SXM4-40GB")["memory_gib"] == 40
    assert resolve(gpus, "NVIDIA A10G")["cc"] == "8.6"
    assert resolve(gpus, "NVIDIA A30")["cc"] == "8.0"
    assert resolve(gpus, "Tesla K80")["cc"] == "3.7"
    assert resolve(gpus, "Tesla P40")["cc"] == "6.1"
    assert resolve(gpus, "NVIDIA B300 SXM6 AC")["cc"] == "10.3"
    assert resolve(gpus, "NVIDIA GeForce RTX 5090")["cc"] == "12.0"
    assert resolve(gpus, "NVIDIA RTX PRO 6000 Blackwell Workstation Edition")["cc"] == "12.0"
    assert resolve(gpus, "NVIDIA GB10")["cc"] == "12.1"
    assert resolve(gpus, "Orin (nvgpu)")["cc"] == "8.7"
    assert resolve(gpus, "NVIDIA GeForce RTX 4090")["p2p_consumer"] is True
    assert resolve(gpus, "NVIDIA H100 80GB HBM3")["p2p_consumer"] is False


def test_arch_rows(gpus):
    rows = {}
    for i, row in enumerate(gpus["arch"]):
        where = f"arch[{i}] {row.get('cc')}"
        check_keys(row, ARCH_REQ, ARCH_OPT, where)
        assert CC_RE.match(row["cc"]), where
        assert row["arch"] in ARCH_NAMES, where
        cc = cc_tuple(row["cc"])
        assert row["fp16_tensor"] == (cc >= (7, 0)), where
        assert row["bf16"] == (cc >= (8, 0)), where
        assert row["tf32"] == (cc >= (8, 0)), where
        assert row["fp8"] == (cc >= (8, 9)), where
        assert row["fp4"] == (cc >= (10, 0)), where
        for key in ("cuda_min", "cuda_max"):
            if key in row:
                assert MAJOR_MINOR.match(row[key]), where
        if "cuda_min" in row and "cuda_max" in row:
            assert Version(row["cuda_min"]) <= Version(row["cuda_max"]), where
        assert row["cc"] not in rows, f"duplicate arch cc {row['cc']}"
        rows[row["cc"]] = row
    # every GPU's cc has an arch row with the same architecture name
    for g in gpus["gpu"]:
        assert g["cc"] in rows, f"{g['name']}: no [[arch]] row for cc {g['cc']}"
        assert rows[g["cc"]]["arch"] == g["arch"], g["name"]
    # spot facts: CUDA 13 dropped Maxwell/Pascal/Volta; Turing is still current; Hopper from 11.8
    for cc in ("5.0", "6.0", "6.1", "7.0", "7.2"):
        assert rows[cc]["cuda_max"] == "12.9", cc
    assert "cuda_max" not in rows["7.5"]
    assert rows["9.0"]["cuda_min"] == "11.8" and rows["8.9"]["cuda_min"] == "11.8"
    assert rows["12.1"]["arch"] == "Blackwell" and rows["10.3"]["cuda_min"] == "12.9"


# ====================================================================== torch_wheels.toml

WHEEL_REQ = {
    "cuda": str, "torch_min": str, "torch_max": str, "archs": list, "ptx": list, "source": str, "status": str,
}
WHEEL_OPT = {"note": str, "verified": list}
RELEASE_REQ = {"torch": str, "cuda": list, "default": str, "source": str, "status": str}
RELEASE_OPT = {"stable": list, "experimental": list, "note": str}


def wheel_archs(wheels: dict, torch_version: str, cuda: str) -> dict | None:
    """Row for a torch release (any X.Y[.Z][+cuXXX]) and torch.version.cuda major.minor."""
    tv = Version(torch_version)
    mm = Version(f"{tv.major}.{tv.minor}")
    rows = [
        w for w in wheels["wheel"]
        if w["cuda"] == cuda and Version(w["torch_min"]) <= mm <= Version(w["torch_max"])
    ]
    assert len(rows) <= 1, f"overlapping rows for torch {torch_version} cu{cuda}"
    return rows[0] if rows else None


def pypi_default_cuda(wheels: dict, torch_version: str) -> str | None:
    tv = Version(torch_version)
    for rel in wheels["release"]:
        if Version(rel["torch"]) == Version(f"{tv.major}.{tv.minor}"):
            return rel["default"]
    return None


def test_wheel_rows_structure(wheels):
    for i, w in enumerate(wheels["wheel"]):
        where = f"wheel[{i}] cu{w.get('cuda')} {w.get('torch_min')}-{w.get('torch_max')}"
        check_keys(w, WHEEL_REQ, WHEEL_OPT, where)
        for key in ("cuda", "torch_min", "torch_max"):
            assert MAJOR_MINOR.match(w[key]), where
            Version(w[key])
        assert Version(w["torch_min"]) <= Version(w["torch_max"]), where
        assert w["archs"], where
        assert all(isinstance(a, str) and CC_RE.match(a) for a in w["archs"]), where
        keys = [cc_tuple(a) for a in w["archs"]]
        assert keys == sorted(set(keys)), f"{where}: archs not sorted/unique"
        # TORCH_CUDA_ARCH_LIST's `+PTX` embeds PTX for the arch it follows: the last one in every build script
        assert w["ptx"] in ([], w["archs"][-1:]), f"{where}: ptx is not the last arch"
        # a partly verified row may name the cells its sources do verify: only its SASS list, the PTX in doubt
        assert w.get("verified", []) in ([], ["archs"]) and not (w["status"] == "verified" and "verified" in w), where


def test_wheel_rows_do_not_overlap(wheels):
    by_cuda: dict[str, list[tuple[Version, Version]]] = {}
    for w in wheels["wheel"]:
        by_cuda.setdefault(w["cuda"], []).append((Version(w["torch_min"]), Version(w["torch_max"])))
    for cuda, ranges in by_cuda.items():
        ranges.sort()
        for (_, hi), (lo, _) in zip(ranges, ranges[1:]):
            assert lo > hi, f"cu{cuda}: overlapping torch ranges"


def test_wheel_spot_facts(wheels):
    for w in wheels["wheel"]:
        if w["cuda"].startswith("13."):
            assert "7.0" not in w["archs"] and "6.0" not in w["archs"] and "5.0" not in w["archs"], w
            assert w["archs"][0] == "7.5", w
    assert "7.0" not in wheel_archs(wheels, "2.7.1", "12.8")["archs"]
    assert "7.0" in wheel_archs(wheels, "2.8.0", "12.8")["archs"]
    assert "7.0" in wheel_archs(wheels, "2.10.0+cu128", "12.8")["archs"]
    assert "7.0" not in wheel_archs(wheels, "2.11.0", "12.8")["archs"]
    assert wheel_archs(wheels, "2.12.0", "12.8") is None  # cu128 gone from 2.12
    assert "3.7" in wheel_archs(wheels, "2.3.1", "11.8")["archs"]
    assert "12.0" not in wheel_archs(wheels, "2.7.0", "12.6")["archs"]
    assert "12.0" in wheel_archs(wheels, "2.9.0", "13.0")["archs"]
    assert "7.0" in wheel_archs(wheels, "2.14.0", "12.6")["archs"]


def test_release_rows(wheels):
    seen = []
    for i, rel in enumerate(wheels["release"]):
        where = f"release[{i}] {rel.get('torch')}"
        check_keys(rel, RELEASE_REQ, RELEASE_OPT, where)
        assert MAJOR_MINOR.match(rel["torch"]), where
        assert rel["cuda"] and all(MAJOR_MINOR.match(c) for c in rel["cuda"]), where
        assert [Version(c) for c in rel["cuda"]] == sorted(Version(c) for c in rel["cuda"]), where
        assert rel["default"] in rel["cuda"], where
        for key in ("stable", "experimental"):
            assert set(rel.get(key, [])) <= set(rel["cuda"]), where
        seen.append(Version(rel["torch"]))
        # every published CUDA tag of a torch >= 2.0 release has an arch row
        if Version(rel["torch"]) >= Version("2.0"):
            for c in rel["cuda"]:
                assert wheel_archs(wheels, rel["torch"], c) is not None, f"{where}: no [[wheel]] for cu{c}"
    assert seen == sorted(seen) and len(seen) == len(set(seen))


def test_pypi_default_inference(wheels):
    assert pypi_default_cuda(wheels, "2.0.1") == "11.7"
    assert pypi_default_cuda(wheels, "2.5.1") == "12.4"
    assert pypi_default_cuda(wheels, "2.7.0") == "12.6"
    assert pypi_default_cuda(wheels, "2.8.0") == "12.8"
    assert pypi_default_cuda(wheels, "2.11.0") == "13.0"
    assert pypi_default_cuda(wheels, "9.9.0") is None
    # a plain PyPI torch 2.11 on a V100 gets no kernels; the cu126 wheel does
    v100_cc = "7.0"
    assert v100_cc not in wheel_archs(wheels, "2.11.0", pypi_default_cuda(wheels, "2.11.0"))["archs"]
    assert v100_cc in wheel_archs(wheels, "2.11.0", "12.6")["archs"]


def test_cross_table_consistency(cuda, gpus, wheels):
    """Every wheel CUDA tag is a real toolkit; every wheel arch is a known compute capability."""
    toolkits = {row["version"] for row in cuda["toolkit"]}
    arch_ccs = {row["cc"] for row in gpus["arch"]}
    for w in wheels["wheel"]:
        assert w["cuda"] in toolkits, w["cuda"]
        for a in w["archs"]:
            assert a in arch_ccs, f"wheel arch {a} has no [[arch]] row"
    for rel in wheels["release"]:
        for c in rel["cuda"]:
            assert c in toolkits, c
