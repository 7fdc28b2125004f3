"""Read pasted report files and logs (``check --from``, ``snapshot --from``) into one Snapshot.

The parsers in this package are pure; this module is the only one that touches files. Each file is streamed in
chunks (UTF-8, or UTF-16 as PowerShell's ``>`` writes it; undecodable bytes replaced): every chunk goes through the
log reader (gpudoctor.ingest.logs, which redacts each line it decodes), and the first ``HEAD_BYTES``, redacted,
through the report parsers (collect_env, ds_report, nvidia-smi … are a few KB; a log of any size is read with
bounded memory). The reports merge (first value wins, differences become conflicts), the logs of all files are read
as one run (ranks are grouped by the host in each line, not by file). A file in which nothing is recognised becomes
an ``inputs`` entry (GD003) as long as another file could be used; when none can, ReportError says why in one line.
"""

from __future__ import annotations

import codecs
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from gpudoctor.files import open_stream
from gpudoctor.ingest.logs import LogScanner
from gpudoctor.ingest.registry import in_words
from gpudoctor.ingest.report import (
    NothingRecognised,
    ParsedReport,
    ReportError,
    _names_agree,
    merge_reports,
    missing_facts,
    parse_report,
)
from gpudoctor.ingest.run_files import expand, is_run
from gpudoctor.provenance import LOG, REPORT
from gpudoctor.redact import redact_bytes

if TYPE_CHECKING:
    from gpudoctor.ingest.run import RunRead

CHUNK_BYTES = 4 * 1024 * 1024
HEAD_BYTES = 1024 * 1024


def _encoding(head: bytes) -> str:
    if head.startswith(b"\xff\xfe") or head.startswith(b"\xfe\xff"):
        return "utf-16"
    sample = head[:400]
    if len(sample) >= 8 and sample[1::2].count(0) > len(sample) // 4 and sample[0::2].count(0) < len(sample) // 8:
        return "utf-16-le"  # UTF-16 without a BOM
    return "utf-8-sig"


def utf8_chunks(stream: BinaryIO) -> Iterator[bytes]:
    """A binary stream as UTF-8 in chunks of whole lines (the last one may lack its newline, and comes with the chunk
    before it, so that a message wrapped onto a text's last line is read whole). UTF-8 passes through undecoded (the
    log reader decodes, and redacts, only the lines it parses); UTF-16 is decoded and re-encoded."""
    block = stream.read(CHUNK_BYTES)
    encoding = _encoding(block)
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace") if encoding != "utf-8-sig" else None
    if decoder is None and block.startswith(codecs.BOM_UTF8):
        block = block[len(codecs.BOM_UTF8):]
    carry, ready = b"", b""
    while block:
        data = carry + (decoder.decode(block).encode("utf-8") if decoder else block)
        cut = data.rfind(b"\n") + 1
        if not cut and len(data) > CHUNK_BYTES:
            cut = len(data)  # a line longer than a chunk (a progress bar without newlines): cut it, bounded
        carry = data[cut:]
        if cut:
            if ready:
                yield ready
            ready = data[:cut]
        block = stream.read(CHUNK_BYTES)
    rest = ready + carry + (decoder.decode(b"", final=True).encode("utf-8") if decoder else b"")
    if rest:
        yield rest


def _open(path: str, stdin: Optional[BinaryIO]) -> BinaryIO:
    if path == "-" and stdin is not None:
        return stdin
    try:
        return open_stream(path)  # a FIFO nobody writes is given up, a pipe that delivers streams
    except FileNotFoundError:
        raise ReportError(f"cannot read report {path!r}: no such file") from None
    except IsADirectoryError:
        raise ReportError(f"cannot read report {path!r}: is a directory") from None
    except OSError as exc:
        raise ReportError(f"cannot read report {path!r}: {exc.strerror or exc}") from None


def _binary(head: bytes) -> bool:
    """Not text: NUL bytes, or mostly bytes that are no UTF-8 (a core dump, an image, a tarball)."""
    if not head:
        return False
    sample = head[:8192]
    return b"\x00" in sample or sample.decode("utf-8", errors="replace").count("\ufffd") * 10 > len(sample)


def read_one(path: str, scanner: LogScanner, stdin: Optional[BinaryIO] = None,
             feed: Optional[Callable[[str, bytes, int], int]] = None, head_bytes: int = HEAD_BYTES) -> ParsedReport:
    """Stream one file through the log reader (`feed`: a run's reader in front of it); the report found in its
    first `head_bytes` (empty `facts` when nothing in it is recognised). ReportError only when the file cannot be
    read as text: missing, a directory, empty, binary."""
    name = "<stdin>" if path == "-" else path
    stream = _open(path, stdin)
    head: List[bytes] = []
    kept, line, last = 0, 1, b""
    try:
        for chunk in utf8_chunks(stream):
            if not kept and _binary(chunk):
                raise ReportError(f"{name}: not text (binary data)")
            if kept < head_bytes:  # redacted whole lines, then cut (a cut token would escape its pattern)
                whole = chunk.find(b"\n", head_bytes - kept) + 1 or len(chunk)
                head.append(redact_bytes(chunk[:whole])[:head_bytes - kept])
                kept += len(head[-1])
            line += (feed or scanner.feed)(name, chunk, line)
            last = chunk[-1:]
    except OSError as exc:
        raise ReportError(f"cannot read report {path!r}: {exc.strerror or exc}") from None
    finally:
        if stream is not stdin:
            stream.close()
    if not kept:
        raise ReportError(f"{name}: the report is empty")
    lines = line - 1 + (last != b"\n")
    try:
        return parse_report(b"".join(head).decode("utf-8", errors="replace"), name)
    except ReportError as exc:
        if not isinstance(exc, NothingRecognised):
            raise
        return ParsedReport(kind="text", facts={}, evidence={}, missing=[], name=name, lines=lines)


def _read_files(paths: Sequence[str], scanner: LogScanner, stdin: Optional[BinaryIO]) -> RunRead:
    """Every file through the log reader: (the reports their heads hold, the run's facts or None, (path, why) for
    those that could not be read, {path, why} for a folder's files not placed, the files placed on a rank)."""
    if is_run(paths):  # a folder, a glob or several files: every rank's logs of one run (gpudoctor.ingest.run)
        from gpudoctor.ingest.run import read_run

        files, failed = expand(paths)
        reports, run, unread, unplaced, placed = read_run(files, scanner, stdin, set(files) - set(paths), read_one)
        return reports, run, failed + unread, unplaced, placed
    read: List[ParsedReport] = []
    failed_one: List[Tuple[str, str]] = []
    for path in paths:
        try:
            read.append(read_one(path, scanner, stdin))
        except ReportError as exc:
            failed_one.append(("<stdin>" if path == "-" else path, str(exc)))
    return read, None, failed_one, [], set()


def _log_reports(scanner: LogScanner, run: Optional[Dict[str, Any]]) -> List[ParsedReport]:
    """What the logs gave: their `logs` facts, the run's facts, the facts their messages state."""
    found = []
    log_facts, log_evidence = scanner.result(read=run is not None)
    if log_facts:
        found.append(ParsedReport(kind="log", facts=log_facts, evidence=log_evidence, missing=[],
                                  name=", ".join(scanner.files), parts=("log",)))
    if run:
        found.append(ParsedReport(kind="log", facts=run, evidence={"run": "every rank's logs read together"},
                                  missing=[], name="run", parts=("log",)))
    if scanner.message_facts:
        found.append(_stated(scanner))
    return found


def snapshot_from_reports(paths: Sequence[str], stdin: Optional[BinaryIO] = None):
    """A Snapshot (source kind "report") from one or more report and log files."""
    from gpudoctor.snapshot import Snapshot

    scanner = LogScanner()
    read, run, failed, unplaced, placed = _read_files(paths, scanner, stdin)
    unknown = [r for r in read if not r.facts and not scanner.found_in(r.name) and r.name not in placed]
    reports = [r for r in read if r.facts] + _log_reports(scanner, run)
    if not reports and not failed:
        source: Dict[str, Any] = {"kind": "report", "paths": list(paths) if is_run(paths) else
                                  [r.name for r in unknown], "formats": [], "missing": [], "nothing": _nothing(unknown)}
        return Snapshot(facts={}, probes=[], source=_with(source, unplaced=unplaced))
    if not reports:
        raise ReportError(failed[0][1] if len(failed) == 1 else
                          "no report could be read: " + "; ".join(msg for _, msg in failed))
    facts, evidence, conflicts = merge_reports(reports)
    _name_gpus(facts, evidence, conflicts, scanner.message_gpus)
    for name, msg in failed:
        facts.setdefault("inputs", []).append(
            {"path": name, "kind": "report", "error": msg, "line": None, "column": None})
    source = _with(_source(paths, reports, facts), warnings=[w for r in reports for w in r.warnings],
                   nothing=_nothing(unknown) if unknown else None, unplaced=unplaced)
    return Snapshot(facts=facts, probes=[], source=source, evidence=evidence, conflicts=conflicts,
                    origins=_origins(reports))


def _source(paths: Sequence[str], reports: Sequence[ParsedReport], facts: Dict[str, Any]) -> Dict[str, Any]:
    """The snapshot's `source`: the files, the formats read, the notable facts the reports did not carry."""
    return {"kind": "report", "paths": ["<stdin>" if p == "-" else p for p in paths],
            "formats": list(dict.fromkeys(r.kind for r in reports)),
            # A log is not meant to carry the machine's facts: "not in the report" only for reports.
            "missing": missing_facts(facts) if any(r.kind != "log" for r in reports) else []}


def _with(source: Dict[str, Any], **more: Any) -> Dict[str, Any]:
    """The source with each of `more` that is not empty."""
    source.update((key, value) for key, value in more.items() if value)
    return source


def _origins(reports: Sequence[ParsedReport]) -> Dict[str, str]:
    """Where each group of the merged facts came from (gpudoctor.provenance): a report's groups, the log's, and the
    facts only a log's messages state (a report's own value wins)."""
    origins: Dict[str, str] = {}
    for report in reports:
        if report.kind == "message":
            for path in _paths(report.facts):
                group = path.split(".", 1)[0]
                if group not in origins:
                    origins[group] = LOG
                elif origins[group] != LOG and not any(_has(r.facts, path) for r in reports if r.kind != "message"):
                    origins[path] = LOG
            continue
        for group in report.facts:
            origins.setdefault(group, LOG if report.kind == "log" else REPORT)
    return origins


def _paths(facts: dict, prefix: str = "") -> List[str]:
    """The dotted paths of the leaves of a nested dict."""
    found = []
    for key, value in facts.items():
        path = f"{prefix}{key}"
        found.extend(_paths(value, path + ".") if isinstance(value, dict) and value else [path])
    return found


def _has(facts: dict, path: str) -> bool:
    node = facts
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _stated(scanner: LogScanner) -> ParsedReport:
    """The facts messages state (torch's capability warning: the arch list), after the reports: a report's own value
    wins, a message that says otherwise is a conflict; a fact two messages state differently is left unknown."""
    facts: dict = {}
    evidence = {}
    conflicts = []
    for path, stated in scanner.message_facts.items():
        other = stated.get("contradicted")
        if other:  # two messages say different things: the fact stays unknown
            conflicts.append({"fact": path, "values": [stated["value"], other["value"]],
                              "sources": [f"{stated['where']}: '{stated['line']}'",
                                          f"{other['where']}: '{other['line']}'"]})
            continue
        *parents, last = path.split(".")
        node = facts
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = stated["value"]
        evidence[path] = f"{stated['where']}: '{stated['line']}'"
    return ParsedReport(kind="message", facts=facts, evidence=evidence, missing=[], name="messages",
                        conflicts=conflicts)


def _name_gpus(facts: dict, evidence: dict, conflicts: list, stated: dict) -> None:
    """A GPU's compute capability a message states (torch's capability warning, vLLM's bf16 error) given to the
    GPUs of that name the reports list without one; a report's own value wins, one that differs is a conflict."""
    for group, key in (("nvml", "gpus"), ("torch", "devices")):
        gpus = facts[group].get(key) if isinstance(facts.get(group), dict) else None
        for i, gpu in enumerate(gpus if isinstance(gpus, list) else []):
            said = next((s for name, s in stated.items() if isinstance(gpu, dict) and "contradicted" not in s
                         and _names_agree(gpu.get("name"), name)), None)
            if said is None:
                continue
            path, quoted = f"{group}.{key}[{i}].cc", f"{said['where']}: '{said['line']}'"
            if gpu.get("cc") is None:
                gpu["cc"] = said["cc"]
                evidence[path] = quoted
            elif str(gpu["cc"]) != said["cc"]:
                conflicts.append({"fact": path, "values": [gpu["cc"], said["cc"]],
                                  "sources": [evidence.get(path, "report"), quoted]})


def _nothing(texts: Sequence[ParsedReport]) -> str:
    """The one line a report prints for texts in which nothing was recognised (the first few of many named)."""
    if len(texts) > 3:
        names = ", ".join(r.name for r in texts[:3])
        return f"nothing gpudoctor knows in {len(texts)} files ({names}, …) (it reads {in_words()})"
    each = "; ".join(f"nothing gpudoctor knows in {r.lines} line{'' if r.lines == 1 else 's'}"
                     f"{f' of {r.name}' if len(texts) > 1 else ''}" for r in texts)
    return f"{each} (it reads {in_words()})"


def overlay_reports(snapshot, paths: Sequence[str], stdin: Optional[BinaryIO] = None) -> None:
    """`--snapshot node.json --from rank0.log`: the recorded machine's facts, with what the reports and logs add
    (the snapshot's values win; a report that says otherwise is recorded as a conflict)."""
    given = snapshot_from_reports(paths, stdin)
    recorded_groups = set(snapshot.facts) | set(snapshot.origins)
    recorded = ParsedReport(kind="snapshot", facts=snapshot.facts, evidence=dict(snapshot.evidence), missing=[],
                            name="snapshot")
    added = ParsedReport(kind="report", facts=given.facts, evidence=given.evidence, missing=[],
                         name=", ".join(given.source["paths"]), conflicts=list(given.conflicts))
    facts, evidence, conflicts = merge_reports([recorded, added])
    snapshot.facts.clear()
    snapshot.facts.update(facts)
    snapshot.evidence.update(evidence)
    snapshot.conflicts.extend(c for c in conflicts if c not in snapshot.conflicts)
    snapshot.origins.update({path: origin for path, origin in given.origins.items()
                             if path.split(".", 1)[0] not in recorded_groups})
    snapshot.source["paths"] = list(snapshot.source.get("paths", [])) + given.source["paths"]
