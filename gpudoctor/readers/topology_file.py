"""The NCCL topology files a job's files point at (`NCCL_TOPO_FILE=topo.xml`), read where they are beside the job
file (never where the job runs): whether NCCL can load them (NCCL's src/graph/xml.cc wants one `<system
version="1">`; a file it cannot parse or of another version stops the communicator's init) and how many GPUs and
NICs they describe (`<pci>` devices of the display and network PCI classes, or `<gpu>` and `<nic>` elements), for
GD437."""

from __future__ import annotations

import xml.etree.ElementTree as ElementTree
from typing import List, Optional

VARIABLE = "NCCL_TOPO_FILE"
XML_VERSION = "1"  # NCCL_TOPO_XML_VERSION in NCCL's src/graph/xml.h
LIMIT = 4 * 1024 * 1024  # a topology of a few hundred PCI devices is tens of KiB
GPU_CLASS, NIC_CLASS = "0x03", "0x02"  # PCI base classes: display controller, network controller


def _count(root: ElementTree.Element, pci_class: str, tag: str) -> int:
    """The devices of one kind: `<pci class="0x03…">` entries, or the `<gpu>`/`<nic>` elements NCCL's dump puts in
    them, whichever is more (a hand-written partial file may have either)."""
    pci = sum(1 for node in root.iter("pci") if (node.get("class") or "").lower().startswith(pci_class))
    return max(pci, sum(1 for _ in root.iter(tag)))


def read_topology(text: str) -> dict:
    """What NCCL would make of a topology file's text: {"error", "fatal", "version", "gpus", "nics"}; `error` is
    None for a file NCCL loads, `fatal` whether its init fails on it (else it ignores the file)."""
    result: dict = {"error": None, "fatal": False, "version": None, "gpus": None, "nics": None}
    if "<!DOCTYPE" in text or "<!ENTITY" in text:  # NCCL's parser knows no DTD; never expand entities
        return dict(result, error="it declares a DTD or entities, which NCCL's XML reader does not parse: the "
                                  "communicator's init fails on it", fatal=True)
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        return dict(result, error=f"it is not well-formed XML ({exc}): NCCL's XML reader stops on it and the "
                                  "communicator's init fails", fatal=True)
    if root.tag != "system":
        return dict(result, error=f"its top element is <{root.tag}>, not <system>: NCCL finds no topology in it")
    result.update(version=root.get("version"), gpus=_count(root, GPU_CLASS, "gpu"), nics=_count(root, NIC_CLASS, "nic"))
    if result["version"] != XML_VERSION:
        said = f"its <system version=\"{result['version']}\">" if result["version"] else "its <system> has no version"
        result.update(error=f"{said}, and NCCL reads only version {XML_VERSION}: its init stops with \"XML Topology "
                            "has wrong version\"", fatal=True)
    return result


def topology_files(assignments, job_path: str) -> List[dict]:
    """One entry per literal `NCCL_TOPO_FILE=…` the file at `job_path` makes: where it was set, the path written,
    the file read for it (relative to the job file, or an absolute path's name beside it; None: not among the job's
    files) and what NCCL would make of it (read_topology)."""
    from gpudoctor.files import read_bytes
    from gpudoctor.readers.follow import candidates

    found = []
    for item in assignments:
        if item.name != VARIABLE or item.unset or item.unresolved or not item.value:
            continue
        entry: dict = {"path": job_path, "line": item.line, "written": item.value, "read": None}
        for candidate in candidates(job_path, item.value):
            text = _text(read_bytes, candidate)
            if text is not None:
                entry.update(read_topology(text), read=candidate)
                break
        found.append(entry)
    return found


def _text(read_bytes, candidate: str) -> Optional[str]:
    try:
        return read_bytes(candidate, LIMIT).decode("utf-8", "replace")
    except OSError:  # not there, a folder, beyond the bound
        return None
