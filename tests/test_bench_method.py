"""`bench nccl` / `bench train` method: the #wrong pattern is exact at any world size (the arithmetic, in float32,
in several summation orders), one rank's buffers stay within 2× the message (measured on CPU through the same
code path), and the GPU-only decisions (ranks per GPU, device_id, bf16, GradScaler, MIG share) on a mocked CUDA."""

import inspect
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from gpudoctor.bench import BenchError, BenchUsageError, launch, nccl, train  # noqa: E402
from gpudoctor.bench.launch import run_ranks  # noqa: E402
from gpudoctor.bench.nccl import CONTRIBUTING_RANKS, FP32_EXACT, PERIOD, NcclConfig, contribution, reduced, tag  # noqa: E402
from gpudoctor.rendezvous import Rank  # noqa: E402

# --- #wrong is exact at any world size ----------------------------------------------------------------------

def _contributions(world):
    """[rank, p] float32: what every rank puts into a reduction at indices p = 0…12."""
    ranks = np.arange(world)[:, None]
    index = np.arange(PERIOD)[None, :]
    values = (index + ranks) % PERIOD + 1
    values[ranks[:, 0] >= CONTRIBUTING_RANKS] = 0
    return values.astype(np.float32)


@pytest.mark.parametrize("world", [8, 1024, 16384])
def test_every_reduction_order_gives_the_exact_expected_value(world):
    values = _contributions(world)
    exact = reduced(world)
    assert exact == [int(v) for v in values.astype(np.int64).sum(axis=0)]  # the closed form is the sum
    assert max(exact) <= FP32_EXACT  # so every partial sum of these non-negative integers is exact in float32
    orders = {
        "rank order": np.cumsum(values, axis=0, dtype=np.float32)[-1],
        "reverse": np.cumsum(values[::-1], axis=0, dtype=np.float32)[-1],
        "pairwise tree": values.sum(axis=0, dtype=np.float32),
        "ring from the middle": np.cumsum(np.roll(values, world // 2, axis=0), axis=0, dtype=np.float32)[-1],
    }
    for name, got in orders.items():
        assert got.tolist() == [float(v) for v in exact], name
    # one rank off by one is always seen: the sum moves by 1, still exact
    corrupted = values.copy()
    corrupted[world - 1] += 1
    assert np.all(np.cumsum(corrupted, axis=0, dtype=np.float32)[-1] == np.array(exact, dtype=np.float32) + 1)


def test_the_old_pattern_was_inexact_beyond_2_to_the_24():
    """The pattern this replaces (value + 16·rank) sums past 2^24 at 16,384 ranks, where float32 rounds."""
    world = 16384
    old = ((np.arange(PERIOD)[None, :] % PERIOD + 1) + 16.0 * np.arange(world)[:, None]).astype(np.float32)
    exact = old.astype(np.float64).sum(axis=0)
    assert exact.max() > FP32_EXACT
    assert not np.array_equal(np.cumsum(old, axis=0, dtype=np.float32)[-1].astype(np.float64), exact)


def test_beyond_the_contributing_ranks_the_sum_stays_bounded():
    world = CONTRIBUTING_RANKS + 5000
    assert contribution(CONTRIBUTING_RANKS - 1, 0) > 0 and contribution(CONTRIBUTING_RANKS, 0) == 0
    assert max(reduced(world)) == max(reduced(CONTRIBUTING_RANKS)) <= FP32_EXACT


def test_copies_name_the_sending_rank_exactly():
    for rank in (0, 1, 16383, 2 ** 20 - 1):
        for index in range(PERIOD):
            value = tag(rank, index)
            assert value < FP32_EXACT and float(np.float32(value)) == value
    assert len({tag(rank, 0) for rank in range(1024)}) == 1024


# --- memory: the buffers and nothing of the message's size besides ------------------------------------------

MESSAGE = 16 * 2 ** 20  # bytes: large against every fixed-size scratch


def _peak_allocated(rank, config):
    """A spawned rank: one size of the real sweep per op under the profiler; {op: peak of torch's allocations}."""
    import json
    import tempfile
    from dataclasses import replace

    from torch.profiler import ProfilerActivity, profile

    group, device, _ = nccl.join(rank, config)
    peaks = {}
    try:
        for op in MEASURED:
            with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
                rows = nccl.sweep(device, replace(config, op=op))
            with tempfile.NamedTemporaryFile(suffix=".json") as trace:
                prof.export_chrome_trace(trace.name)
                with open(trace.name) as handle:
                    events = [e["args"] for e in json.load(handle)["traceEvents"] if e.get("name") == "[memory]"]
            base = events[0]["Total Allocated"] - events[0]["Bytes"]
            peaks[op] = {"peak": max(e["Total Allocated"] for e in events) - base, "wrong": rows[0]["wrong"]}
    finally:
        group.leave()
    return peaks


MEASURED = ("all_reduce", "alltoall", "all_gather")


@pytest.mark.slow
def test_one_rank_holds_at_most_twice_the_message():
    config = NcclConfig(min_bytes=MESSAGE, max_bytes=MESSAGE, iters=1, warmup=0, backend="gloo")
    _, peaks = run_ranks(_peak_allocated, config, 2)
    scratch = nccl.VERIFY_BLOCK + 2 ** 16  # one boolean block while counting, and small tensors
    # gloo's all_gather gathers into a flat tensor of the output's size on its work thread, then copies it into the
    # output: the profiler records that copy only when the thread allocates while it records (not gpudoctor's)
    backend_copy = {"all_gather": MESSAGE}
    for op in MEASURED:
        assert peaks[op]["wrong"] == 0
        assert peaks[op]["peak"] <= nccl.buffer_bytes(op, MESSAGE, 2) + backend_copy.get(op, 0) + scratch, op
        assert peaks[op]["peak"] <= 2 * MESSAGE + backend_copy.get(op, 0) + scratch, op
    assert peaks["all_reduce"]["peak"] <= MESSAGE + scratch  # in place: the one buffer


# --- refused before any rank starts -------------------------------------------------------------------------

@pytest.fixture
def two_gpus(monkeypatch):
    """torch as on a node with two GPUs (the parts the bench reads before any CUDA work)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: SimpleNamespace(total_memory=80 * 2 ** 30))
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    for name in ("RANK", "WORLD_SIZE", "SLURM_PROCID", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(launch, "run_ranks", lambda *a, **k: pytest.fail("a rank started"))


def test_more_ranks_than_gpus_is_refused_up_front(two_gpus):
    with pytest.raises(BenchUsageError, match="4 but this machine shows 2 GPU.*Duplicate GPU detected"):
        nccl.run(NcclConfig(), nprocs=4)


def test_ranks_bind_the_gpu_as_the_launcher_exposes_it(two_gpus, monkeypatch):
    """torchrun: every rank sees the node's GPUs, local rank i → cuda:i; srun --gpus-per-task=1: each task sees
    its own one GPU (device_count 1) while SLURM_LOCALID runs 0–7 → cuda:0 everywhere."""
    device, backend = nccl._device_and_backend(torch, Rank(1, 3, 1, "env://", "torchrun"), "auto")
    assert (device, backend) == (torch.device("cuda", 1), "nccl")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for local in range(8):
        assert nccl._device_and_backend(torch, Rank(local, 8, local, "env://", "slurm"), "auto")[0] == \
            torch.device("cuda", 0)


def test_ranks_bind_by_cudas_own_count_not_nvmls(two_gpus, monkeypatch):
    """One A100 split into seven MIG devices (driver R570): before CUDA initialises torch.cuda.device_count() is
    NVML's 1 (pytorch#83973), after it CUDA's 7. Local rank 5 binds cuda:5, not cuda:0 beside rank 0."""
    state = {"initialized": False}
    monkeypatch.setattr(torch.cuda, "init", lambda: state.update(initialized=True))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 7 if state["initialized"] else 1)
    assert nccl._device_and_backend(torch, Rank(5, 7, 5, "env://", "torchrun"), "auto")[0] == torch.device("cuda", 5)


SRUN = {"SLURM_PROCID": "5", "SLURM_STEP_NUM_TASKS": "16", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "5",
        "SLURM_NODEID": "0", "SLURM_STEP_TASKS_PER_NODE": "8(x2)", "MASTER_ADDR": "n1", "MASTER_PORT": "29500"}


@pytest.mark.parametrize("env, devices, refused", [
    ({**SRUN, "SLURM_GPUS_PER_TASK": "1"}, 1, False),           # srun --gpus-per-task=1: each task its own GPU
    (SRUN, 8, False),                                          # 8 tasks seeing the node's 8 GPUs
    (SRUN, 4, True),                                           # 8 tasks sharing 4 GPUs: refused on every rank
    ({**SRUN, "SLURM_STEP_TASKS_PER_NODE": "4,8", "SLURM_NODEID": "1"}, 4, True),
    ({**SRUN, "SLURM_GPUS_PER_TASK": "1", "SLURM_GPU_BIND": "none"}, 1, True),  # bound per task: overridden
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "8", "MASTER_ADDR": "n1",
      "MASTER_PORT": "29500"}, 4, True),                       # torchrun --nproc-per-node 8 on 4 GPUs
])
def test_oversubscription_under_a_launcher_is_refused_before_the_group_forms(two_gpus, monkeypatch, env, devices,
                                                                             refused):
    for name in ("SLURM_GPUS_PER_TASK", "SLURM_GPU_BIND", "LOCAL_RANK", "SLURM_LOCALID"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: devices)
    monkeypatch.setattr(launch, "run_ranks", lambda *a, **k: "started")
    if refused:
        with pytest.raises(BenchUsageError, match="Duplicate GPU detected"):
            nccl.run(NcclConfig())
    else:
        assert nccl.run(NcclConfig()) == "started"


def test_a_rank_refuses_buffers_beyond_the_free_memory_of_its_gpu(monkeypatch):
    """Free, not total: other processes and NCCL's own buffers (NCCL_BUFFSIZE per channel) take their share."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (3 * 2 ** 30, 80 * 2 ** 30))
    monkeypatch.delenv("NCCL_BUFFSIZE", raising=False)
    config = NcclConfig(op="all_gather", max_bytes=2 ** 30)  # 2 GiB of buffers (input and output)
    nccl._fits_free_memory(torch, torch.device("cuda", 0), config, 2)  # + 512 MiB of NCCL's: fits in 3 GiB
    monkeypatch.setenv("NCCL_BUFFSIZE", str(16 << 20))  # NCCL's grow to 2 GiB
    with pytest.raises(BenchError, match="needs 4 GiB on cuda:0 .* but 3 GiB is free"):
        nccl._fits_free_memory(torch, torch.device("cuda", 0), config, 2)


def test_buffers_larger_than_the_gpu_are_refused_up_front(two_gpus):
    with pytest.raises(BenchUsageError, match="needs 128 GiB of buffers for alltoall.*the GPU has 80 GiB"):
        nccl.run(NcclConfig(op="alltoall", max_bytes=64 * 2 ** 30), nprocs=2)


def test_device_id_goes_to_init_process_group_where_torch_takes_it(monkeypatch):
    import torch.distributed as dist

    calls = []
    monkeypatch.setattr(nccl, "_device_and_backend", lambda t, rank, backend: (torch.device("cuda", 1), "nccl"))
    monkeypatch.setattr(nccl, "_fits_free_memory", lambda *args: None)

    def init_with_device_id(backend, init_method=None, rank=-1, world_size=-1, timeout=None, device_id=None):
        calls.append(device_id)

    def init_before_2_3(backend, init_method=None, rank=-1, world_size=-1, timeout=None):
        calls.append("no device_id")

    rank = Rank(1, 2, 1, "tcp://127.0.0.1:1", "local")
    for fake in (init_with_device_id, init_before_2_3):
        monkeypatch.setattr(dist, "init_process_group", fake)
        nccl.join(rank, NcclConfig())
    assert calls == [torch.device("cuda", 1), "no device_id"]
    assert "device_id" in inspect.signature(init_with_device_id).parameters


# --- bench train on GPUs ---------------------------------------------------------------------------------------

def _gpu(monkeypatch, name, capability):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "init", lambda: None)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # torch ≥ 2.3 says so on a T4


def test_bf16_on_a_gpu_before_ampere_is_refused(monkeypatch):
    _gpu(monkeypatch, "Tesla T4", (7, 5))
    with pytest.raises(BenchError, match=r"Tesla T4 \(compute capability 7.5\) has no native bf16"):
        train._device(torch, train.TrainConfig(precision="bf16", device="cuda"))


def test_bf16_on_ampere_runs(monkeypatch):
    _gpu(monkeypatch, "NVIDIA A100-SXM4-80GB", (8, 0))
    assert train._device(torch, train.TrainConfig(precision="bf16", device="cuda")) == torch.device("cuda", 0)


def test_grad_scaler_falls_back_to_torch_cuda_amp_before_2_3():
    made = []
    old = SimpleNamespace(amp=SimpleNamespace(), cuda=SimpleNamespace(amp=SimpleNamespace(
        GradScaler=lambda: made.append("torch.cuda.amp") or "scaler")))
    assert train.grad_scaler(old, torch.device("cuda", 0)) == "scaler" and made == ["torch.cuda.amp"]
    assert isinstance(train.grad_scaler(torch, torch.device("cpu")), torch.amp.GradScaler)


def test_a_grad_scaler_that_cannot_be_built_is_gd703_not_a_crash(monkeypatch):
    def missing(torch, device):
        raise AttributeError("module 'torch.amp' has no attribute 'GradScaler'")

    monkeypatch.setattr(train, "grad_scaler", missing)
    monkeypatch.setattr(train, "_device", lambda torch, config: torch.device("cpu"))
    result = train.run(train.TrainConfig(precision="fp16", steps=1, warmup=0, layers=1, hidden=32, heads=2,
                                         seq_len=8, vocab=64))
    assert result["error"]["step"] == 0 and result["error"]["type"] == "AttributeError"
    assert result["steps_completed"] == 0


def test_mfu_uses_the_mig_slice_share_of_the_peak():
    assert train.mig_share("NVIDIA H100 80GB HBM3") == 1.0
    assert train.mig_share("NVIDIA A100-SXM4-40GB MIG 3g.20gb") == pytest.approx(3 / 7)
    assert train.mig_share("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == pytest.approx(1 / 7)
    assert train.mig_share("NVIDIA A30 MIG 2g.12gb") == pytest.approx(2 / 4)
    assert train.mig_share("NVIDIA B300 MIG 34GB") is None, "a MIG device without its profile: unknown share"


def test_the_mig_share_comes_from_nvml_by_uuid_when_it_answers(monkeypatch):
    import gpudoctor.probes.nvml

    uuid = "MIG-5c1e3a2b-0f7d-5b6e-9a8c-1d2e3f405162"
    gpus = [{"index": 0, "uuid": "GPU-aaaa", "mig_enabled": True,
             "mig_devices": [{"uuid": uuid, "sm_count": 42, "sm_share": 0.4286}]}]
    _gpu(monkeypatch, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: SimpleNamespace(uuid=uuid[4:]))
    monkeypatch.setattr(gpudoctor.probes.nvml, "read_gpus", lambda timeout: gpus)
    assert train.slice_share(torch, torch.device("cuda", 0)) == 0.4286
    monkeypatch.setattr(gpudoctor.probes.nvml, "read_gpus", lambda timeout: [])
    assert train.slice_share(torch, torch.device("cuda", 0)) == pytest.approx(3 / 7)  # from the name
    from gpudoctor.knowledge import gpu_spec

    full = gpu_spec("NVIDIA H100 80GB HBM3")["bf16_dense_tflops"]
    assert train._peak_tflops(torch, torch.device("cuda", 0)) == pytest.approx(full * 3 / 7)
    _gpu(monkeypatch, "NVIDIA H100 80GB HBM3 MIG 40GB", (9, 0))
    assert train._peak_tflops(torch, torch.device("cuda", 0)) is None, "unknown slice: no MFU, never a guess"


def test_no_test_hook_is_left_in_the_benchmarks():
    """Faults are injected from the test side (tests/faults/sitecustomize.py): production reads no test variable."""
    for module in (nccl, train, launch):
        assert "GPUDOCTOR_BENCH_" not in inspect.getsource(module), module.__name__
