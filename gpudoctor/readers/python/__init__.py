"""Python files, parsed once and walked once (`ast`, `tree.Tree`; never imported or run): the training-script
analysis (`script`), the env dicts a launcher sets or hands to the processes it starts (`env`), and the jobs nemo_run
executors describe (`nemo`), all read from that one walk."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.readers.file_facts import FileFacts

SUFFIXES = (".py", ".pyw")
# The reader's time grows with the syntax nodes (a statement every four bytes is its slowest shape): real scripts have
# one node per ten bytes or so (transformers' 230 KiB trainer.py: 24,000), benchmarks/reader_bounds.py --at-bounds
# measures the slowest file this admits.
MAX_NODES = 100_000


def detect(path: Path, text: str) -> bool:
    """By suffix, or by a `#!…python` first line."""
    if path.suffix.lower() in SUFFIXES:
        return True
    first = text[:200].split("\n", 1)[0]
    return first.startswith("#!") and "python" in first


def read(path: Path, text: str) -> FileFacts:
    """Every fact of one Python file. The bytes are decoded as Python decodes them (BOM, coding cookie): re-read
    from disk, or `text` when the file is not there."""
    from gpudoctor.files import read_bytes
    from gpudoctor.readers.env import ReadResult
    from gpudoctor.readers.file_facts import BeyondBounds
    from gpudoctor.readers.python import env, nemo
    from gpudoctor.readers.python.names import module_aliases
    from gpudoctor.readers.python.script import analyse_source
    from gpudoctor.readers.python.source import decode, parse
    from gpudoctor.readers.python.tree import Tree

    try:
        raw = read_bytes(str(path))
    except OSError:
        raw = text.encode("utf-8", "replace")
    decoded, problems = decode(raw)
    source = parse(decoded, str(path))
    tree = Tree(source.tree) if source.tree is not None else None
    if tree is not None and len(tree.nodes) > MAX_NODES:
        raise BeyondBounds(f"a Python script of {len(tree.nodes):,} syntax nodes, more than {MAX_NODES:,}")
    facts = FileFacts(env=ReadResult(), script=analyse_source(str(path), source, problems, tree))
    if tree is not None:
        aliases = module_aliases(tree)
        facts.env = env.read(tree, str(path), aliases)
        if "nemo_run" in decoded:
            facts.jobs = nemo.jobs(tree, source.lines, str(path), aliases)
    return facts
