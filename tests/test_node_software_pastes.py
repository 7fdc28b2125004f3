"""Pastes about the node's software and devices (MIG, NCCL's interfaces and graph file, the fabric manager, WSL's
libcuda, memory no listed process holds, fp8 on GPUs without it): what fires, at what severity, with which fix, and
the near misses that stay silent."""

from gpudoctor.api import evaluate
from gpudoctor.ingest.source import snapshot_from_reports

TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 535.104.05   Driver Version: 535.104.05   CUDA Version: 12.2     |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  NVIDIA GeForce ...  Off  | 00000000:01:00.0 Off |                  N/A |
| 30%   40C    P2    80W / 350W |  {used:>5}MiB / 24576MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+

+-----------------------------------------------------------------------------+
| Processes:                                                       GPU Memory |
|  GPU       PID   Type   Process name                             Usage      |
|=============================================================================|
{rows}+-----------------------------------------------------------------------------+
"""
NONE_FOUND = "|  No running processes found                                                 |\n"


def _findings(tmp_path, text):
    path = tmp_path / "paste.txt"
    path.write_text(text)
    return {f.rule: f for f in evaluate(snapshot_from_reports([str(path)])).findings}


def test_torchs_device_count_assert_names_mig_only_where_the_paste_shows_it(tmp_path):
    error = ("RuntimeError: device >= 0 && device < num_gpus INTERNAL ASSERT FAILED at \"../aten/src/ATen/cuda/"
             "CUDAContext.cpp\":50, please report a bug to PyTorch.\n")
    alone = _findings(tmp_path, error)["GD107"]
    assert "CUDA_VISIBLE_DEVICES before Python starts" in alone.fix.summary
    mig = TABLE.replace("Compute M. |", "Compute M. |\n|                               |                      |"
                                       "               MIG M. |")
    mig = mig.replace("|                  N/A |\n| 30%", "|                   On |\n| 30%").replace(
        "Default |\n", "Default |\n|                               |                      |              Enabled |\n")
    in_mig = _findings(tmp_path, mig.format(used=50, rows=NONE_FOUND) + error)["GD107"]
    assert "MIG mode" in in_mig.message


def test_the_fabric_managers_own_log_is_gd105_not_an_nccl_failure(tmp_path):
    found = _findings(tmp_path, "nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02 "
                                "don't match with driver version 530.41.03. Please update with matching NVIDIA driver "
                                "package.\n")
    assert "GD105" in found and "GD425" not in found


def test_libcuda_not_found_under_wsl_gets_the_wsl_loader_path(tmp_path):
    error = "OSError: libcuda.so: cannot open shared object file: No such file or directory\n"
    under_wsl = _findings(tmp_path, "Ubuntu 22.04 on WSL 2\n" + error)["GD105"]
    assert "/usr/lib/wsl/lib" in under_wsl.message and "/usr/lib/wsl/lib" in under_wsl.fix.summary
    elsewhere = _findings(tmp_path, error)["GD105"]
    assert "/usr/lib/wsl" not in elsewhere.fix.summary


def test_nccls_own_libcuda_warning_under_wsl_is_routine(tmp_path):
    text = ("WSL 2\nDESKTOP-VMBL43V:4163:4163 [0] misc/cudawrap.cc:179 NCCL WARN Failed to find CUDA library "
            "libcuda.so "
            "(NCCL_CUDA_PATH='') : libcuda.so: cannot open shared object file: No such file or directory\n")
    assert "GD105" not in _findings(tmp_path, text)


def test_memory_in_use_that_no_listed_process_holds_is_information(tmp_path):
    for rows in (NONE_FOUND, ""):  # 'No running processes found', or a panel nvidia-smi could not fill (container)
        found = _findings(tmp_path, TABLE.format(used=12799, rows=rows))
        assert found["GD502"].severity.name == "INFO", rows
        assert "no process is listed" in found["GD502"].message


def test_memory_no_listed_process_holds_is_a_warning_where_the_paste_runs_out_of_memory(tmp_path):
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
           "23.68 GiB of which 1.05 GiB is free.\n")
    found = _findings(tmp_path, TABLE.format(used=12799, rows=NONE_FOUND) + oom)
    assert found["GD502"].severity.name == "WARNING"


def test_a_cuda_contexts_worth_of_memory_with_no_process_listed_says_nothing(tmp_path):
    assert "GD502" not in _findings(tmp_path, TABLE.format(used=412, rows=NONE_FOUND))


def test_transformers_dequantizing_an_fp8_model_is_not_a_refusal(tmp_path):
    text = ("FP8 quantized models is only supported on GPUs with compute capability >= 8.9 (e.g 4090/H100), actual = "
            "`8.6`. We will default to dequantizing the model to bf16. Feel free to use a different quantization "
            "method like bitsandbytes or torchao\n")
    assert "GD202" not in _findings(tmp_path, text)


def test_triton_without_fp8e4nv_is_gd202(tmp_path):
    message = "type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')"
    for text in (f'ValueError("{message}")\n', f"{message}\"\n"):  # raised, or quoted bare in an issue
        assert "GD202" in _findings(tmp_path, text), text
