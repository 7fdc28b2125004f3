"""`bench nccl --plot FILE` and `bench compare A B --plot FILE`: bus bandwidth against message size, one line per
run and collective, as nccl-tests' users draw them, with the floor a run was held to (`--min-busbw`) dashed in. SVG
or PNG by the file's suffix, drawn with matplotlib (the `plot` extra), imported only here."""

from __future__ import annotations

import io
from typing import Optional, Sequence, Set, Tuple

from gpudoctor.errors import InputError
from gpudoctor.units import size

FORMATS = {".svg": "svg", ".png": "png"}


def image_format(path: str) -> str:
    """The image format a --plot FILE asks for by its suffix; a usage error for any other."""
    suffix = path[path.rfind("."):].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if suffix not in FORMATS:
        raise InputError(f"--plot {path!r}: give a file ending in .svg or .png")
    return FORMATS[suffix]


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install matplotlib (gpudoctor's plot extra)") from None
    matplotlib.use("Agg")  # files only, never a window
    matplotlib.rcParams["svg.fonttype"] = "none"  # an SVG's words stay text: searchable, readable by a screen reader
    matplotlib.rcParams["svg.hashsalt"] = "gpudoctor"  # the same runs draw the same file
    import matplotlib.pyplot as plt

    return plt


def draw(runs: Sequence[Tuple[str, dict]], fmt: str, title: Optional[str] = None) -> bytes:
    """The figure of `runs` (label, a gpudoctor.bench.nccl/1 result) as SVG or PNG bytes."""
    plt = _pyplot()
    from matplotlib.ticker import FixedLocator, FuncFormatter

    figure, axes = plt.subplots(figsize=(8, 4.5))
    sizes: Set[int] = set()
    for label, result in runs:
        for op in dict.fromkeys(row["op"] for row in result["rows"]):
            rows = sorted((row for row in result["rows"] if row["op"] == op), key=lambda row: row["bytes"])
            sizes.update(row["bytes"] for row in rows)
            name = label if len(runs) > 1 and len({r["op"] for r in result["rows"]}) == 1 else f"{label} {op}"
            axes.plot([row["bytes"] for row in rows], [row["busbw_gbps"] for row in rows], marker="o",
                      markersize=3, label=name.strip(), gid=f"series-{len(axes.lines)}")
        floor = (result.get("summary") or {}).get("min_busbw_gbps")
        if floor is not None:
            axes.axhline(floor, linestyle="--", linewidth=1, color="grey",
                         label=f"{label} floor {floor:g} GB/s".strip())
    axes.set_xscale("log", base=2)
    ticks = sorted(sizes)[::max(1, len(sizes) // 8)]
    axes.xaxis.set_major_locator(FixedLocator(ticks))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: size(int(value))))
    axes.set_xlabel("message size")
    axes.set_ylabel("bus bandwidth (GB/s)")
    axes.set_ylim(bottom=0)
    axes.grid(True, which="major", linewidth=0.3)
    first = runs[0][1]
    axes.set_title(title or f"{first['op']} · {first['backend']} · {first['world_size']} ranks on {first['nodes']} "
                   f"node{'s' if first['nodes'] != 1 else ''}")
    axes.legend(loc="upper left", fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(figure)
    return buffer.getvalue()


def write_plot(path: str, runs: Sequence[Tuple[str, dict]], force: bool = False) -> None:
    """Draw `runs` into `path` (its suffix chooses SVG or PNG), written as every gpudoctor output is."""
    from gpudoctor.files import write_file

    data = draw(runs, image_format(path))
    try:
        write_file(path, data, force=force)
    except OSError as exc:
        raise InputError(f"cannot write {path!r}: {exc.strerror or exc}") from None
