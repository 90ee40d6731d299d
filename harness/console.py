"""Status lines on stderr for the long commands (run, scale, bisect).

A closed terminal (SIGHUP, interrupts.py) makes writing to it fail with OSError; a
status line that cannot be shown is not an error of the command, so it is dropped.
"""

import sys


def say(text, quiet=False):
    """Print `text` on stderr (unless `quiet`); a closed terminal is not an error."""
    if quiet:
        return
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass
