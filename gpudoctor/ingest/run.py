"""`check --from DIR` (a folder, a glob, several files): every file of one run read as that run.

Each file is a flight-recorder dump (read as data, gpudoctor.ingest.flight_recorder) or a log streamed through the
log reader with the run's reader in front of it (gpudoctor.ingest.run_logs), which places each line on its rank. A
file a folder holds that is neither (an image, a tarball, a pickle that is no dump) is listed as not placed, not
an error; a file named on the command line that cannot be read is an error as before.
"""

from __future__ import annotations

from typing import BinaryIO, Callable, Dict, List, Optional, Sequence, Set, Tuple

from gpudoctor.ingest.flight_recorder import MAX_DUMP_BYTES, DumpError, collectives, load, looks_like_dump
from gpudoctor.ingest.logs import LogScanner
from gpudoctor.ingest.report import ParsedReport, ReportError
from gpudoctor.ingest.run_files import identify
from gpudoctor.ingest.run_logs import RunReader

HEAD = 512
# A report in a rank's log (an `nvidia-smi` screen, `collect_env` at the top of a job's output) is read from its
# first REPORT_HEAD_BYTES: a few KB of text, where a single log is read for 1 MiB (what 512 files would cost: the
# head is redacted line by line before the report parsers see it).
REPORT_HEAD_BYTES = 16 * 1024


# (the reports the files' heads hold, the run facts or None, the files given that could not be read, the files a folder
# held that could not be placed, the files something was placed on a rank from)
RunRead = Tuple[List[ParsedReport], Optional[Dict], List[Tuple[str, str]], List[Dict], Set[str]]


def _head(path: str) -> bytes:
    try:
        with open(path, "rb") as stream:
            return stream.read(HEAD)
    except OSError:
        return b""


def _read_dump(path: str) -> bytes:
    with open(path, "rb") as stream:
        return stream.read(MAX_DUMP_BYTES + 1)


def read_run(paths: Sequence[str], scanner: LogScanner, stdin: Optional[BinaryIO], found: Set[str],
             read_one: Callable[..., ParsedReport]) -> RunRead:
    """(the reports the files' heads hold, the `run` facts or None, (path, why) for the files named on the command
    line that could not be read, {path, why} for those a folder or glob gave (`found`) that could not be placed,
    the files something was placed on a rank from). `read_one` streams one log (gpudoctor.ingest.source)."""
    reader = RunReader(scanner)
    reports: List[ParsedReport] = []
    failed: List[Tuple[str, str]] = []
    for path in paths:
        run_file = identify(path)
        if path != "-" and looks_like_dump(_head(path)):
            try:
                reader.add_dump(run_file, collectives(load(_read_dump(path), path)))
            except (DumpError, OSError) as exc:
                _unplaced(reader, failed, found, path, str(exc))
            continue
        reader.start_file(run_file)
        try:
            reports.append(read_one(path, scanner, stdin, feed=reader.feed, head_bytes=REPORT_HEAD_BYTES))
        except ReportError as exc:
            _unplaced(reader, failed, found, path, str(exc))
    return reports, reader.result() or None, failed, list(reader.unreadable), reader.placed


def _unplaced(reader: RunReader, failed: List[Tuple[str, str]], found: Set[str], path: str, why: str) -> None:
    if path in found and why.endswith("the report is empty"):
        return  # an empty file of the run (a rank's stdout.log that nothing was written to)
    if path in found:
        reader.unplaced(path, why)
    else:
        failed.append((path, why))
