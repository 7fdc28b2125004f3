"""The NVML tests against the oldest nvidia-ml-py that pyproject.toml allows, besides the installed (newest) one
the rest of the suite uses: a release that reads a struct with another size, lacks an exception class or names
fewer return codes shows here (12.535.108 names no GPU_NOT_FOUND, INVALID_STATE or RESET_TYPE_NOT_SUPPORTED, and
raises FUNCTION_NOT_FOUND where newer releases raise NVMLLibraryMismatchError).

.ci/run installs that release apart (`pip install --target .ci-nvml-oldest`) and names the folder in
GPUDOCTOR_NVML_OLDEST; the tests then run in a pytest of their own with that folder first on the import path, so
the test process and the NVML probe child it starts (which gets the parent's pynvml path entry) both use it.
Elsewhere the test skips with the command that sets it up."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, required_or_skip

FLOOR = re.search(r'"nvidia-ml-py>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
TESTS = ["tests/test_nvml.py", "tests/test_nvml_errors.py", "tests/test_gpu_devices_mig.py"]
WHICH = ("import importlib.metadata, pynvml\nfrom gpudoctor.probes.nvml import child_argv\n"
         "print(importlib.metadata.version('nvidia-ml-py'), pynvml.__file__, child_argv()[-1])")


def _oldest() -> Path:
    folder = os.environ.get("GPUDOCTOR_NVML_OLDEST")
    if not folder or not (Path(folder) / "pynvml.py").is_file():
        required_or_skip("GPUDOCTOR_REQUIRE_TOOLS", f"nvidia-ml-py {FLOOR} is not installed apart: "
                         f"pip install --no-deps --target DIR nvidia-ml-py=={FLOOR}; GPUDOCTOR_NVML_OLDEST=DIR "
                         "(.ci/run does both)")
    return Path(folder).resolve()


@pytest.mark.slow
def test_the_nvml_tests_pass_on_the_oldest_nvidia_ml_py_allowed():
    folder = _oldest()
    path = [str(folder), str(ROOT), os.environ.get("PYTHONPATH", "")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, path)))
    which = subprocess.run([sys.executable, "-c", WHICH], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=60)
    version, module, child_path = which.stdout.split()
    assert version == FLOOR and Path(module).parent == folder and Path(child_path) == folder, which.stderr
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *TESTS],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
