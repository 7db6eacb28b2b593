"""A progress line on stderr for long data preparation: rewritten in place on a terminal, a line per update
otherwise (so logs stay readable)."""

import sys
import time


class Progress:
    """`<what>: <count> <unit> (<rate> <unit>/s)`, with optional extra text.

    Args:
        what: What is being done, e.g. "wmt14_ende train".
        unit: What is counted, e.g. "pairs".
        stream: Where to write (default: stderr).
        min_interval: Seconds between lines when not on a terminal.
    """

    def __init__(self, what, unit, stream=None, min_interval=10.0):
        self.what = what
        self.unit = unit
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.min_interval = 0.2 if self.tty else min_interval
        self.began = time.perf_counter()
        self._last = self.began  # The first line after `min_interval`: quick jobs print only their total.
        self.count = 0

    def update(self, count, note="", force=False):
        self.count = count
        now = time.perf_counter()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        rate = count / max(now - self.began, 1e-9)
        text = f"{self.what}: {count:,} {self.unit} ({rate:,.0f} {self.unit}/s){', ' + note if note else ''}"
        self.stream.write(("\r\033[K" + text) if self.tty else text + "\n")
        self.stream.flush()

    def close(self, note=""):
        self.update(self.count, note, force=True)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
