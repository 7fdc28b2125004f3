import os
import signal
import sys


def _terminated_while_loading(signum, frame):
    """SIGTERM before the command line has its own handler (gpudoctor.cli.guard): one line and 143, not a silent
    death."""
    os.write(2, b"gpudoctor: terminated\n")
    os._exit(128 + signal.SIGTERM)


if __name__ == "__main__":  # spawned bench workers re-import this module as __mp_main__
    signal.signal(signal.SIGTERM, _terminated_while_loading)
try:
    from gpudoctor.cli import main
except KeyboardInterrupt:  # Ctrl-C while the command line loads: one line, never a traceback
    if __name__ != "__main__":
        raise
    print("gpudoctor: interrupted", file=sys.stderr)
    raise SystemExit(128 + signal.SIGINT) from None

if __name__ == "__main__":  # the command's own handler replaces this one while it runs
    raise SystemExit(main())
