"""The mock interview's scorecard: one record per attempt, in ``work/interview/scorecard.json``,
and when each problem comes back.

A record keeps the problem and variant, the mode (``interviewer``: a run says pass or fail and
which case; ``coach``: every run names the mistake), how many times the tests ran, the hints
taken, the time from the notebook's creation to the first pass of the visible cases and to the
first full (clean) pass, every diagnosis seen (in order, once each) and the follow-ups
answered. The spacing is the flashcards' Leitner schedule
(:class:`autograder.tools.nb10_flashcards.Schedule`) with
problems for cards: an attempt that never passed counts as "again", a pass over the time box
or with a hint "hard", one within it "good", and "easy" with the code follow-up passed too. An
attempt is graded in the schedule when the next one starts, its follow-ups known. Every file is
written whole and atomically, so the kernel and the command line never see half of one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

from autograder.tools.nb10_flashcards import Card, Schedule

FOLDER = "interview"  # under work/: the attempts' notebooks, the scorecard, the schedule
SCORECARD = "scorecard.json"
SCHEDULE = "schedule.json"


def _path(folder: Path) -> Path:
    return Path(folder) / SCORECARD


def load(folder: Path) -> dict:
    """The scorecard in ``folder`` (an empty one when there is none yet)."""
    path = _path(folder)
    if not path.is_file():
        return {"version": 1, "attempts": []}
    return json.loads(path.read_text(encoding="utf-8"))


def _save(folder: Path, data: dict) -> None:
    path = _path(folder)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)


def new_attempt(
    folder: Path,
    problem: str,
    variant: str,
    spoken: list[str],
    mode: str = "interviewer",
    written: tuple[str, ...] = (),
    numeric: tuple[str, ...] = (),
    box_minutes: int = 20,
) -> dict:
    """Record a new attempt at ``problem``; its record (``id`` names its notebook)."""
    data = load(folder)
    number = 1 + sum(a["problem"] == problem for a in data["attempts"])
    record = {
        "id": f"{problem}-{number}",
        "problem": problem,
        "variant": variant,
        "mode": mode,
        "created": time.time(),
        "box_minutes": box_minutes,
        "runs": 0,
        "hints": 0,
        "visible_pass_s": None,
        "first_pass_s": None,
        "diagnoses": [],
        "last_diagnosis": None,
        "debriefed": False,
        "extension": {"runs": 0, "passed": False, "diagnoses": []},
        "spoken": {q: {"tries": 0, "right": False} for q in spoken},
        "written": {q: {"text": None, "covered": None} for q in written},
        "numeric": {q: {"value": None, "right": None} for q in numeric},
        "rating": None,
    }
    data["attempts"].append(record)
    _save(folder, data)
    return record


def attempt(folder: Path, attempt_id: str) -> dict:
    return next(a for a in load(folder)["attempts"] if a["id"] == attempt_id)


def update(folder: Path, attempt_id: str, change: Callable[[dict], None]) -> dict:
    """Apply ``change`` to the record of ``attempt_id`` as it is on disk now, and save it."""
    data = load(folder)
    record = next(a for a in data["attempts"] if a["id"] == attempt_id)
    change(record)
    _save(folder, data)
    return record


def open_attempt(folder: Path, now: float | None = None) -> dict | None:
    """The attempt under way in ``folder``: not debriefed, its time box not over; else None."""
    now = time.time() if now is None else now
    for record in reversed(load(folder)["attempts"]):
        box = 60 * record.get("box_minutes", 20)
        if not record.get("debriefed", True) and now - record["created"] < box:
            return record
    return None


def last_variant(folder: Path, problem: str) -> str | None:
    """The variant of the latest attempt at ``problem``, if any."""
    variants = [a["variant"] for a in load(folder)["attempts"] if a["problem"] == problem]
    return variants[-1] if variants else None


# ------------------------------------------------------------------------------- spacing


def schedule(folder: Path, problems: list[str], clock: Callable[[], float] = time.time):
    """The Leitner schedule of ``problems`` (their ids are its cards), kept in ``folder``."""
    deck = [Card(p, p, "", "problems", "") for p in problems]
    return Schedule(deck, Path(folder) / SCHEDULE, clock)


def rating(record: dict, box_minutes: int) -> str:
    """How an attempt went, in the schedule's grades."""
    seconds = record["first_pass_s"]
    if seconds is None:
        return "again"
    if seconds > 60 * box_minutes or record.get("hints"):  # a hint costs
        return "hard"
    if record["extension"]["passed"]:
        return "easy"
    return "good"


def rate(folder: Path, plan: Schedule, attempt_id: str, box_minutes: int) -> str:
    """Grade the attempt's problem in ``plan`` once; the grade given."""
    record = attempt(folder, attempt_id)
    if record["rating"] is not None:
        return record["rating"]
    grade = rating(record, box_minutes)
    plan.grade(record["problem"], grade)
    update(folder, attempt_id, lambda r: r.update(rating=grade))
    return grade


def next_problem(plan: Schedule) -> str:
    """The problem due first: never tried, failed or slow ones come back soonest."""
    due = plan.due()
    if due:
        return due[0].id
    return min(plan.state, key=lambda p: plan.state[p].due)


# ------------------------------------------------------------------------------- reading


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes:02d}:{secs:02d}"


def summary_lines(folder: Path, now: float | None = None) -> list[str]:
    """One line per problem tried: attempts, passes, best time, diagnoses, follow-ups, when
    it comes back. Empty when no attempt was made."""
    path = _path(folder)
    if not path.is_file():
        return []
    attempts = load(folder)["attempts"]
    states = {}
    if (Path(folder) / SCHEDULE).is_file():
        states = json.loads((Path(folder) / SCHEDULE).read_text(encoding="utf-8"))["cards"]
    now = time.time() if now is None else now
    lines = []
    for problem in dict.fromkeys(a["problem"] for a in attempts):
        mine = [a for a in attempts if a["problem"] == problem]
        times = [a["first_pass_s"] for a in mine if a["first_pass_s"] is not None]
        best = f"best {_clock(min(times))}" if times else "not passed yet"
        diagnoses = sum(len(a["diagnoses"]) for a in mine)
        asked = [s for a in mine for s in a["spoken"].values()] + [a["extension"] for a in mine]
        asked += [s for a in mine for s in a.get("numeric", {}).values()]
        answered = sum(bool(s.get("right") or s.get("passed")) for s in asked)
        hints = sum(a.get("hints", 0) for a in mine)
        hinted = f", {hints} hint(s)" if hints else ""
        covered = [s for a in mine for s in a.get("written", {}).values() if s["covered"]]
        points = sum(len(s["covered"]) for s in covered)
        said = f", {points} rubric point(s) covered" if covered else ""
        due = states.get(problem, {}).get("due")
        when = ""
        if due is not None:
            days = (due - now) / 86_400
            when = "; due now" if days <= 0 else f"; back in {days:.0f} day(s)"
        lines.append(
            f"{problem:<18} {len(mine)} attempt(s), {len(times)} passed, {best}, "
            f"{diagnoses} diagnosis(es) seen{hinted}, follow-ups {answered}/{len(asked)}{said}"
            f"{when}"
        )
    return lines
