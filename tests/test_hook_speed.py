"""What keeps the pre-job hooks fast, checked for being right: package versions read from the dist-info folders
(as importlib.metadata finds them, without importing it), and the node check never starting the torch probe."""

import importlib.util
import json
import subprocess
from importlib import metadata

from conftest import FIXTURES, ROOT, gpudoctor_cmd


def _torch_child():
    spec = importlib.util.spec_from_file_location("torch_child", ROOT / "gpudoctor" / "probes" / "torch_child.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_versions_from_dist_info_folders_match_importlib_metadata():
    child = _torch_child()
    names = {dist.metadata["Name"] for dist in metadata.distributions() if dist.metadata["Name"]}
    assert len(names) > 20
    for name in sorted(names) + ["no-such-distribution", "nvidia-nccl-cu13"]:
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert child._distribution_version(name) == expected, name


def test_the_prolog_selection_needs_no_torch():
    """GD105 and the GD5xx rules judge the node: the Prolog's check starts no torch probe (`slurm` reads gres.conf,
    and only under Slurm)."""
    result = subprocess.run(gpudoctor_cmd() + ["check", "--select", "GD105,GD5", "--format", "json"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    report = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert {probe["name"] for probe in report["probes"]} == {"nvml", "env", "system", "slurm"}


def test_nvml_initialisation_is_reported_as_its_own_figure(run_cli, tmp_path):
    """Without persistence mode the driver initialises every GPU when NVML starts: the report says how long that
    took apart from gpudoctor's own time, so a site can tell the two apart."""
    snapshot = json.loads((FIXTURES / "machines" / "h100x8-healthy.json").read_text())
    snapshot["facts"]["nvml"]["init_seconds"] = 4.2
    path = tmp_path / "slow-init.json"
    path.write_text(json.dumps(snapshot))
    _, out, _ = run_cli("check", "--snapshot", path, "--select", "GD506", "--format", "json")
    assert json.loads(out)["timings"] == {"nvml_init_seconds": 4.2}
    _, text, _ = run_cli("check", "--snapshot", path, "--select", "GD506", "--format", "prometheus")
    assert "\ngpudoctor_nvml_init_seconds{check=\"gpudoctor\"} 4.2\n" in text
    del snapshot["facts"]["nvml"]["init_seconds"]  # a recording without it: nothing is claimed
    path.write_text(json.dumps(snapshot))
    _, out, _ = run_cli("check", "--snapshot", path, "--select", "GD506", "--format", "json")
    assert json.loads(out)["timings"] == {}
