"""The host's RAM and network interfaces as psutil reports them (virtual_memory, net_if_addrs, net_if_stats): on
Linux read the way psutil reads them, /proc/meminfo, getifaddrs(3) and the SIOCGIFFLAGS ioctl, through ctypes and
without importing psutil (~10 ms of every check); through psutil elsewhere, and wherever something is not as
expected. tests/test_host_probe.py holds each answer to psutil's on the same machine."""

from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import os
import struct
import sys
from typing import Dict, List, Optional, Tuple

AF_INET, AF_INET6, SOCK_DGRAM = 2, 10, 2  # Linux's values
SIOCGIFFLAGS, IFF_RUNNING = 0x8913, 0x40  # linux/sockios.h, linux/if.h: psutil's `isup` is IFF_RUNNING


class _Sockaddr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("data", ctypes.c_ubyte * 14)]


class _SockaddrIn6(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("port", ctypes.c_uint16), ("flowinfo", ctypes.c_uint32),
                ("addr", ctypes.c_ubyte * 16), ("scope_id", ctypes.c_uint32)]


class _Ifaddrs(ctypes.Structure):
    pass


_Ifaddrs._fields_ = [("next", ctypes.POINTER(_Ifaddrs)), ("name", ctypes.c_char_p), ("flags", ctypes.c_uint),
                     ("addr", ctypes.POINTER(_Sockaddr)), ("netmask", ctypes.POINTER(_Sockaddr)),
                     ("broadcast", ctypes.POINTER(_Sockaddr)), ("data", ctypes.c_void_p)]


def memory() -> Tuple[int, int]:
    """(total, available) bytes of RAM: psutil.virtual_memory's on Linux, MemTotal and MemAvailable."""
    if sys.platform.startswith("linux"):
        try:
            with open("/proc/meminfo", "rb") as handle:
                fields = dict(line.split(b":", 1) for line in handle.read().splitlines() if b":" in line)
            return int(fields[b"MemTotal"].split()[0]) * 1024, int(fields[b"MemAvailable"].split()[0]) * 1024
        except (OSError, KeyError, ValueError, IndexError):  # a kernel before 3.14 (psutil estimates it), no /proc
            pass
    import psutil

    found = psutil.virtual_memory()
    return int(found.total), int(found.available)


def hostname() -> str:
    """socket.gethostname(): the kernel's node name, which gethostname(2) returns on Linux."""
    if sys.platform.startswith("linux"):
        return os.uname().nodename
    import socket

    return socket.gethostname()


def interfaces() -> List[dict]:
    """Each interface by name, whether it is running (psutil's `isup`; None where it has no stats, an address
    label such as eth0:1) and its IPv4 and IPv6 addresses, in the order getifaddrs lists them."""
    found = _linux_addresses() if sys.platform.startswith("linux") else None
    if found is None:
        return _psutil_interfaces()
    libc = ctypes.CDLL(None, use_errno=True)
    probe = libc.socket(AF_INET, SOCK_DGRAM, 0)  # what the ioctl is asked through, as psutil asks it
    if probe < 0:
        return _psutil_interfaces()
    try:
        return [{"name": name, "up": _running(probe, name), "addresses": addresses}
                for name, addresses in sorted(found.items())]
    finally:
        os.close(probe)


def _psutil_interfaces() -> List[dict]:
    import socket

    import psutil

    stats = psutil.net_if_stats()
    result = []
    for name, addresses in sorted(psutil.net_if_addrs().items()):
        inet = [a.address for a in addresses if a.family in (socket.AF_INET, socket.AF_INET6)]
        result.append({"name": name, "up": bool(stats[name].isup) if name in stats else None, "addresses": inet})
    return result


def _linux_addresses() -> Optional[Dict[str, List[str]]]:
    """Every interface getifaddrs lists, with its IPv4 and IPv6 addresses as psutil writes them; None when the call
    fails."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        head = ctypes.POINTER(_Ifaddrs)()
        if libc.getifaddrs(ctypes.byref(head)) != 0:
            return None
    except (OSError, AttributeError):
        return None
    found: Dict[str, List[str]] = {}
    try:
        entry = head
        while entry:
            item = entry.contents
            name = item.name.decode(errors="surrogateescape")
            addresses = found.setdefault(name, [])
            if item.addr:
                text = _address_text(libc, item.addr)
                if text:
                    addresses.append(text)
            entry = item.next
    finally:
        libc.freeifaddrs(head)
    return found


def _address_text(libc, pointer) -> Optional[str]:
    """An IPv4 or IPv6 address as getnameinfo(NI_NUMERICHOST) writes it, which psutil calls (inet_ntop's text, and
    `%` and the interface's name after a link-local IPv6 address); None for other families."""
    family = pointer.contents.family
    if family == AF_INET:
        return str(ipaddress.IPv4Address(bytes(pointer.contents.data[2:6])))
    if family != AF_INET6:
        return None
    v6 = ctypes.cast(pointer, ctypes.POINTER(_SockaddrIn6)).contents
    raw = bytes(v6.addr)
    if raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff":  # glibc's inet_ntop writes the IPv4 part of these
        text = f"::ffff:{ipaddress.IPv4Address(raw[12:])}"
    elif raw[:12] == bytes(12) and raw[12:14] != bytes(2):
        text = f"::{ipaddress.IPv4Address(raw[12:])}"
    else:
        text = ipaddress.IPv6Address(raw).compressed
    if v6.scope_id:
        link_local = (raw[0] == 0xFE and raw[1] & 0xC0 == 0x80) or (raw[0] == 0xFF and raw[1] & 0x0F == 0x02)
        scope = _interface_name(libc, v6.scope_id) if link_local else None
        text += f"%{scope if scope else v6.scope_id}"
    return text


def _interface_name(libc, index: int) -> Optional[str]:
    buffer = ctypes.create_string_buffer(64)
    return buffer.value.decode(errors="surrogateescape") if libc.if_indextoname(index, buffer) else None


def _running(probe: int, name: str) -> Optional[bool]:
    """IFF_RUNNING of the interface's flags (SIOCGIFFLAGS), which psutil reads as `isup`; None for an address label
    (eth0:1: no interface name has a colon, and psutil gives labels no stats) and where the kernel has no such
    interface."""
    if ":" in name:
        return None
    try:
        answer = fcntl.ioctl(probe, SIOCGIFFLAGS, struct.pack("16sh14x", name.encode(errors="surrogateescape"), 0))
    except (OSError, ValueError, struct.error):
        return None
    return bool(struct.unpack("16sh14x", answer)[1] & IFF_RUNNING)
