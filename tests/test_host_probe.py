"""The host's RAM, name and network interfaces, read on Linux without psutil (gpudoctor.probes.host_memory_net),
held to what psutil says on the same machine: this one, and a network namespace of its own with a down veth, an
address label, link-local, global and IPv4-embedding IPv6 addresses."""

import json
import shutil
import socket
import subprocess
import sys

import psutil
import pytest
from conftest import ROOT

from gpudoctor.probes import host_memory_net

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the psutil-free reading is Linux's")


def test_the_interfaces_are_psutils():
    assert host_memory_net.interfaces() == host_memory_net._psutil_interfaces()


def test_the_memory_and_the_name_are_psutils():
    total, available = host_memory_net.memory()
    assert total == psutil.virtual_memory().total
    assert abs(available - psutil.virtual_memory().available) < 0.05 * total  # it moves between the two reads
    assert host_memory_net.hostname() == socket.gethostname()


NAMESPACE = """
set -e
ip link set lo up
ip addr add 10.1.2.3/8 dev lo
ip addr add 10.1.2.4/8 dev lo label lo:1
ip -6 addr add 2001:db8:0:0:1:0:0:1/64 dev lo
ip -6 addr add ::ffff:10.0.0.1/128 dev lo
ip -6 addr add ::10.0.0.2/128 dev lo
ip link add v0 type veth peer name v1
ip addr add 192.168.5.1/24 dev v0
ip -6 addr add fe80::abcd/64 dev v0
ip link set v0 up
exec "$@"
"""
COMPARE = ("import json, sys; sys.path.insert(0, sys.argv[1]); from gpudoctor.probes import host_memory_net as h; "
           "print(json.dumps([h.interfaces(), h._psutil_interfaces()]))")


def test_in_a_namespace_of_labels_veths_and_every_kind_of_ipv6_address_they_are_psutils():
    if not shutil.which("unshare") or not shutil.which("ip"):
        pytest.skip("needs unshare and iproute2")
    done = subprocess.run(["unshare", "-n", "sh", "-c", NAMESPACE, "sh", sys.executable, "-c", COMPARE, str(ROOT)],
                          capture_output=True, text=True, timeout=60)
    if done.returncode != 0 and ("Operation not permitted" in done.stderr or "unshare failed" in done.stderr):
        pytest.skip(f"no network namespace here: {done.stderr.strip()[:200]}")
    assert done.returncode == 0, done.stderr
    ours, psutils = json.loads(done.stdout)
    assert ours == psutils
    names = {item["name"]: item for item in ours}
    assert names["v0"]["up"] is False and names["lo:1"]["up"] is None  # no carrier; a label has no stats
    assert "fe80::abcd%v0" in names["v0"]["addresses"] and "::ffff:10.0.0.1" in names["lo"]["addresses"]
