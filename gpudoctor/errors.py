"""The one error type for input gpudoctor cannot use (a missing file, a malformed snapshot, a bad policy …).

Readers and loaders raise it (or a subclass) with one line naming the input; the CLI prints that line and exits 2.
"""


class InputError(Exception):
    """Input the user gave that gpudoctor cannot use: one clear line, exit 2 on the command line."""
