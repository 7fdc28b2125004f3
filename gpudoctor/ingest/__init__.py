"""Pasted text reports and logs to snapshot facts (see docs/snapshot.md).

    from gpudoctor.ingest.report import parse_report, merge_reports
    report = parse_report(text, name="issue-1234.txt")    # auto-detects; ReportError if nothing recognisable

The formats and their parsers are listed once, in gpudoctor.ingest.registry; `source.py` reads files (`check
--from`) into one snapshot, `logs.py` and `atlas.py` read a training job's log. Importing this package loads none of
them: the command line's help lists the formats from the registry without loading a parser.
"""
