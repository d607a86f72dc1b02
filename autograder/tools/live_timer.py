"""The clock of notebook 10's live-coding round: elapsed time shown while it runs, stopped by the
first run of the round's test cell that passes.

``LiveTimer("check_causal_mha_live").start()`` returns an ipywidgets ``Label`` that a background
thread updates once a second (``Live round: 03:12 of a 20:00 box …``). After each cell IPython
runs, the timer looks at it: the first cell that calls the round's check and ends without an
error (its test cell, passed) stops the clock, and the label keeps that time. Running the timer
cell again starts a new round and retires the old clock. Under nbgrader's autograde nothing
ticks (no thread is started in a graded kernel); the label shows the time when it is read.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable

import ipywidgets as widgets

TICK_S = 1.0
GIVE_UP_S = 3 * 3600  # a clock left running in a forgotten tab stops ticking after three hours

_current: list[LiveTimer] = []  # the round now running, if any


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


class LiveTimer:
    """A round's clock: started by :meth:`start`, stopped by the first passing test cell that
    calls ``check_name``."""

    def __init__(self, check_name: str, box_minutes: int = 20, now: Callable = time.monotonic):
        self.check_name = check_name
        self.box_s = box_minutes * 60
        self.now = now
        self.started: float | None = None
        self.passed_after: float | None = None
        self.label = widgets.Label()
        self._stop = threading.Event()

    def elapsed(self) -> float:
        """Seconds since the start, frozen at the first pass."""
        if self.started is None:
            return 0.0
        return self.passed_after if self.passed_after is not None else self.now() - self.started

    def text(self) -> str:
        """What the label says now."""
        box = _clock(self.box_s)
        if self.started is None:
            return "Live round: not started (run the timer cell)."
        if self.passed_after is not None:
            return (
                f"Live round: your test cell first passed after {_clock(self.passed_after)} "
                f"(the box was {box}). Run the timer cell again to try again."
            )
        over = " (over the box: keep going)" if self.elapsed() > self.box_s else ""
        return (
            f"Live round: {_clock(self.elapsed())} of a {box} box{over}, running until "
            f"the test cell that calls `{self.check_name}` passes."
        )

    def _show(self) -> None:
        self.label.value = self.text()

    def start(self, started: float | None = None) -> widgets.Label:
        """Start the round (retiring any earlier one), now or at ``started`` (a time of
        ``now``'s clock: a mock interview's starts when its notebook is written); the label to
        display."""
        for old in _current:
            old.retire()
        _current[:] = [self]
        self.started, self.passed_after = self.now() if started is None else started, None
        shell = _shell()
        if shell is not None:
            shell.events.register("post_run_cell", self.after_cell)
        if os.environ.get("NBGRADER_EXECUTION") != "autograde":
            threading.Thread(target=self._tick, name="live-round-clock", daemon=True).start()
        self._show()
        return self.label

    def after_cell(self, result) -> None:
        """IPython ``post_run_cell`` callback: the first passing run of the check stops the
        clock."""
        source = getattr(result.info, "raw_cell", "") or ""
        calls = re.search(rf"\b{re.escape(self.check_name)}\s*\(", source)  # not the timer cell
        if result.success and calls and self.passed_after is None:
            self.passed_after = self.now() - self.started
            self.retire()
            self._show()

    def retire(self) -> None:
        """Stop ticking and watching cells (the label keeps its last text)."""
        self._stop.set()
        shell = _shell()
        if shell is not None and self.after_cell in shell.events.callbacks["post_run_cell"]:
            shell.events.unregister("post_run_cell", self.after_cell)

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S) and self.elapsed() < GIVE_UP_S:
            self._show()


def _shell():
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()
