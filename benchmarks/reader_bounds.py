"""Time and memory per input byte of each reader of user input, at two sizes (the ratio shows it is linear).

    python benchmarks/reader_bounds.py [--kb 512]
    python benchmarks/reader_bounds.py --at-bounds

`--at-bounds`: each job-file format's slowest input shape (a command, a scalar or a statement every few bytes),
at that format's bound (gpudoctor.readers.registry.FORMATS), and MAX_ENV_ENTRIES variable settings, through
`gpudoctor lint FILE` in process: seconds (wall clock and CPU) and peak Python memory. docs/safety.md states the
bounds this measures.

For each input kind — pasted log (`check --from`, redaction included), `.env`, shell script, Kubernetes manifest,
Dockerfile, site policy (TOML, a quarter of the size: the limit is 1 MiB), and redaction of one long unbroken token
— builds an input of about --kb KB and four times that, reads it in process (best of two runs, then once under
tracemalloc) (gpudoctor.readers' registry, gpudoctor.ingest.source, gpudoctor.policy), and prints MB/s, the peak of
Python memory per input byte (tracemalloc) and the time ratio of the larger input to the smaller (about 4 when
linear, 16 when quadratic). docs/safety.md states the bounds this measures.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _lines(line: str, size: int) -> str:
    return line * max(1, size // len(line))


def _read_file(name: str):
    def read(text: str) -> None:
        from gpudoctor.readers.registry import find

        path = Path(tempfile.gettempdir(), name)
        find(path, text).read(path, text)
    return read


def _pasted(text: str) -> None:
    from gpudoctor.ingest.source import snapshot_from_reports

    snapshot_from_reports(["-"], io.BytesIO(text.encode()))


def _policy(text: str) -> None:
    from gpudoctor.policy import PolicyError, load_policy

    path = Path(tempfile.gettempdir(), "gpudoctor-bench-policy.toml")
    path.write_text(text)
    try:
        load_policy(str(path))
    except PolicyError:
        pass  # the parse is what is measured


def _redact(text: str) -> None:
    from gpudoctor.redact import redact_text

    redact_text(text)


LOG = ("gpu-a01:40211:40367 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n"
       "{'loss': 2.1234, 'grad_norm': 1.25, 'learning_rate': 1e-05, 'epoch': 0.12}\n"
       "Authorization: Bearer hf_QQQQQQQQQQQQQQQQQQQQQQQQ and https://me:pw@hub.example/x\n")
KINDS = {
    "pasted log": (lambda size: _lines(LOG, size), _pasted),
    ".env": (lambda size: _lines("NCCL_DEBUG=INFO\nHF_TOKEN='hf_x'\nbad line\n", size), _read_file("job.env")),
    "shell script": (lambda size: "#!/bin/bash\n" + _lines("export NCCL_DEBUG=INFO\nsrun python train.py --lr 1e-4\n",
                                                           size), _read_file("job.sh")),
    "Kubernetes manifest": (lambda size: "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n"
                            "  - name: c\n    image: x\n    env:\n"
                            + _lines("    - {name: NCCL_DEBUG, value: INFO}\n", size), _read_file("pod.yaml")),
    "Dockerfile": (lambda size: "FROM x\n" + _lines("ENV NCCL_DEBUG=INFO\nRUN pip install torch\n", size),
                   _read_file("Dockerfile")),
    "site policy": (lambda size: 'schema = "gpudoctor.policy/1"\n' + "".join(
        f'[[rule]]\nid = "SITE{i:03d}"\nname = "r{i}"\nseverity = "info"\nmessage = "m"\n'
        'require = { fact = "nvml.driver_version", op = "version_ge", value = "550" }\n'
        for i in range(max(1, size // 4 // 130))), _policy),  # a quarter: a policy is at most 1 MiB
    "one long token": (lambda size: "https://" + "a" * size, _redact),
}


def _max_statements() -> int:
    from gpudoctor.readers.python import MAX_NODES

    return (MAX_NODES - 3) // 4  # `x=1`: Assign, Name, Store, Constant; the module and its import: 3


_PYTHON_STATEMENTS = _max_statements()  # the most the node bound admits


# each format's slowest shape measured (an entry every few bytes) as a text of `size` bytes, and one that sets
# MAX_ENV_ENTRIES variables (the rules' time grows with them)
WORST = {
    "ncclconf": ("nccl.conf", lambda size: "#\n" * (size // 2)),
    "dockerfile": ("Dockerfile", lambda size: "FROM x\n" + "RUN a\n" * (size // 6)),
    "python": ("train.py", lambda size: "import os\n" + "x=1\n" * min((size - 20) // 4, _PYTHON_STATEMENTS)),
    "yaml": ("pod.yaml", lambda size: "kind: Pod\nx: [" + "1," * ((size - 20) // 2) + "]\n"),
    "shell": ("job.sh", lambda size: "#!/bin/bash\n" + "a;" * ((size - 20) // 2) + "\n"),
    "dotenv": ("job.env", lambda size: "#\n" * (size // 2)),
    "ds_config": ("ds_config.json", lambda size: '{"train_batch_size": 1, ' + "".join(
        f'"k{i}": 1, ' for i in range(size // 12)) + '"z": 1}'),
    "config-yaml": ("config.yaml", lambda size: "x: [" + "1," * ((size - 20) // 2) + "]\n"),
}
SETTINGS = {  # MAX_ENV_ENTRIES settings in each format that sets variables
    "ncclconf": lambda count: "A=\n" * count,
    "dockerfile": lambda count: "FROM x\nENV " + "A=1 " * count + "\n",
    "yaml": lambda count: "kind: Pod\nspec:\n  containers:\n  - name: c\n    env:\n" + "    - {name: A}\n" * count,
    "shell": lambda count: "#!/bin/bash\nset -a\n" + "A=1;" * count + "\n",
    "dotenv": lambda count: "A=1\n" * count,
}


def at_bounds() -> None:
    import contextlib

    from gpudoctor.cli import main as gpudoctor
    from gpudoctor.readers.registry import FORMATS, MAX_ENV_ENTRIES

    print(f"{'format':12} {'input':>22} {'seconds':>8} {'CPU s':>6} {'memory MB':>10}")
    folder = Path(tempfile.mkdtemp(prefix="gpudoctor-bounds-"))
    for fmt in FORMATS:
        name, build = WORST[fmt.name]
        worst = build(fmt.max_bytes)[:fmt.max_bytes]
        texts = [(f"{len(worst.encode()) // 1024} KiB", worst)]
        if fmt.name in SETTINGS:
            texts.append((f"{MAX_ENV_ENTRIES:,} settings", SETTINGS[fmt.name](MAX_ENV_ENTRIES)))
        for label, text in texts:
            path = folder / name
            path.write_text(text)
            started, cpu = time.perf_counter(), time.process_time()
            tracemalloc.start()
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                code = gpudoctor(["lint", str(path), "--format", "json"])
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert code in (0, 1), (fmt.name, label, code)  # accepted: within the bounds
            print(f"{fmt.name:12} {label:>22} {time.perf_counter() - started:8.1f} {time.process_time() - cpu:6.1f} "
                  f"{peak / 1e6:10.0f}", flush=True)


def measure(build, read, size: int):
    """(input bytes, seconds: best of two, peak Python memory in a third run under tracemalloc)."""
    text = build(size)
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        read(text)
        seconds.append(time.perf_counter() - started)
    tracemalloc.start()
    read(text)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return len(text.encode()), min(seconds), peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", type=int, default=512, help="size of the smaller input, KB (default 512)")
    parser.add_argument("--at-bounds", action="store_true", help="each format's slowest shape at its bound")
    args = parser.parse_args()
    if args.at_bounds:
        at_bounds()
        return
    print(f"{'input':22} {'MB/s':>8} {'memory/byte':>12} {'time ×4 size':>13}")
    for name, (build, read) in KINDS.items():
        read(build(64))  # imports and caches first
        small = measure(build, read, args.kb * 1024)
        large = measure(build, read, 4 * args.kb * 1024)
        rate = large[0] / large[1] / 1e6
        print(f"{name:22} {rate:8.2f} {large[2] / large[0]:12.1f} {large[1] / small[1]:13.1f}")


if __name__ == "__main__":
    main()
