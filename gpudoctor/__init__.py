"""gpudoctor: find what will break or slow a GPU training job before it runs.

The library's three calls (see docs/library.md): `collect(Request(...))` → Snapshot, `evaluate(snapshot)` →
Report, `format_report(report, fmt)` → text. They are imported on first use, so the command line stays fast.
"""

from gpudoctor.version import __version__ as __version__  # re-exported: gpudoctor.__version__

_API = ("Request", "collect", "evaluate", "format_report", "collect_pasted", "estimate_memory", "rule_catalog",
        "describe_rule", "message_atlas", "preview_fix")


def __getattr__(name):
    if name in _API:
        from gpudoctor import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpudoctor' has no attribute {name!r}")
