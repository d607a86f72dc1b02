"""Notebook 10's live-coding clock: it shows the time as it runs, and the first passing run of the
round's test cell stops it (``tools.live_timer``)."""

import threading
import types

import pytest

from autograder.tools import live_timer


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


class Events:
    def __init__(self):
        self.callbacks = {"post_run_cell": []}

    def register(self, name, fn):
        self.callbacks[name].append(fn)

    def unregister(self, name, fn):
        self.callbacks[name].remove(fn)


def _ran(source: str, success: bool):
    return types.SimpleNamespace(success=success, info=types.SimpleNamespace(raw_cell=source))


@pytest.fixture
def shell(monkeypatch):
    shell = types.SimpleNamespace(events=Events())
    monkeypatch.setattr(live_timer, "_shell", lambda: shell)
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")  # no thread: the test moves the clock
    monkeypatch.setattr(live_timer, "_current", [])
    return shell


def test_the_label_shows_the_elapsed_time_and_the_first_pass_stops_it(shell):
    clock = Clock()
    timer = live_timer.LiveTimer("check_causal_mha_live", box_minutes=20, now=clock)
    label = timer.start()
    assert label.value.startswith("Live round: 00:00 of a 20:00 box"), label.value
    clock.t += 192
    timer._show()  # what the thread does every second
    assert label.value.startswith("Live round: 03:12 of a 20:00 box"), label.value
    for cell in shell.events.callbacks["post_run_cell"]:
        cell(_ran('timer = LiveTimer("check_causal_mha_live")', success=True))  # the timer's cell
        cell(_ran("check_causal_mha_live(causal_mha_live)", success=False))  # failed: runs on
        cell(_ran("x = 1", success=True))  # another cell: runs on
    assert timer.passed_after is None
    clock.t += 100
    shell.events.callbacks["post_run_cell"][0](_ran("check_causal_mha_live(f)", success=True))
    assert label.value.startswith("Live round: your test cell first passed after 04:52"), label
    assert shell.events.callbacks["post_run_cell"] == []  # stopped watching
    clock.t += 600
    assert timer.elapsed() == 292 and "04:52" in timer.text()


def test_running_the_timer_cell_again_retires_the_old_round(shell):
    first = live_timer.LiveTimer("check_x", now=Clock())
    first.start()
    second = live_timer.LiveTimer("check_x", now=Clock())
    second.start()
    assert first._stop.is_set() and not second._stop.is_set()
    assert shell.events.callbacks["post_run_cell"] == [second.after_cell]


def test_the_clock_ticks_on_its_own_outside_grading(shell, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION")
    monkeypatch.setattr(live_timer, "TICK_S", 0.01)
    clock = Clock()
    timer = live_timer.LiveTimer("check_x", now=clock)
    label = timer.start()
    clock.t += 61
    changed = threading.Event()
    label.observe(lambda change: changed.set(), names="value")
    assert changed.wait(5), label.value
    assert "01:01" in label.value
    timer.retire()
