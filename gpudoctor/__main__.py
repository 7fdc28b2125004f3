"""The program: `gpudoctor` (the console script) and `python -m gpudoctor`."""

import gc
import os
import signal
import sys

# Python's cyclic garbage collector, by default, traces the young objects each time 700 more have been made. What
# gpudoctor makes while it loads (modules, classes, the rules) lives as long as the run, and was traced again and
# again: ~10 ms of every check. As the program, it waits for this many; a long run (a fleet, a large log) still
# collects. A library caller's own settings are left alone.
GC_THRESHOLD = 50_000


def _terminated_while_loading(signum, frame):
    """SIGTERM before the command line has its own handler (gpudoctor.cli.guard): one line and 143, not a silent
    death."""
    os.write(2, b"gpudoctor: terminated\n")
    os._exit(128 + signal.SIGTERM)


def program() -> int:
    """Load the command line and run the command given on it; SIGTERM or Ctrl-C while it loads: one line."""
    gc.set_threshold(GC_THRESHOLD, *gc.get_threshold()[1:])
    signal.signal(signal.SIGTERM, _terminated_while_loading)  # the command's own handler replaces it while it runs
    try:
        from gpudoctor.cli import main
    except KeyboardInterrupt:  # Ctrl-C while the command line loads: one line, never a traceback
        print("gpudoctor: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    return main()


if __name__ == "__main__":  # spawned bench workers re-import this module as __mp_main__: nothing runs then
    raise SystemExit(program())
