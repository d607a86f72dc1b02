"""The flashcard deck covers every point of the two source texts; the Leitner schedule, its JSON
file and the widget behave as notebook 10 describes them."""

import json
import re

import ipywidgets as widgets
import pytest

from autograder.tools import nb10_deck as deck
from autograder.tools import nb10_flashcards as fc

# Every point of the glossary entry (000) and of the explainer (004) that notebook 10 covers.
SEED_POINTS = {
    "000 definition",
    "000 why: diverse representations",
    "000 why: richer expressiveness",
    "000 why: stable training",
    "000 why: interpretability",
    "000 how it works (project, attend, concatenate, project)",
    "000 formula",
    "000 question: how many heads",
    "000 question: do heads learn different things",
    "000 question: why not a wider single head",
    "000 question: what is GQA",
    "000 references",
    "004 summary",
    "004 why one head is not enough",
    "004 illustrative example and its caveat",
    "004 mechanical process",
    "004 parallel, not sequential",
    "004 practical use: head count and model size",
    "004 mistake: fixed human-interpretable jobs",
    "004 mistake: more heads is always better",
    "004 interview relevance",
    "004 practice question",
}


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_deck_is_well_formed():
    ids = [card.id for card in deck.DECK]
    assert len(ids) == len(set(ids))
    for card in deck.DECK:
        assert card.front.strip() and card.back.strip() and card.revisit.startswith("notebook")
        assert card.group in deck.GROUPS[1:]
    assert {card.group for card in deck.DECK} == set(deck.GROUPS[1:])


def test_every_seed_point_has_a_card():
    assert set(deck.SEED_POINTS) == SEED_POINTS
    ids = {card.id for card in deck.DECK}
    for point, cards in deck.SEED_POINTS.items():
        assert cards and set(cards) <= ids, point


def test_new_cards_are_all_due_in_deck_order():
    schedule = fc.Schedule(clock=Clock())
    assert [c.id for c in schedule.due()] == [c.id for c in fc.DECK]
    core = schedule.due("core ideas")
    assert core and all(c.group == "core ideas" for c in core)


@pytest.mark.parametrize(
    ("grades", "box"),
    [
        (["good"], 1),
        (["easy"], 2),
        (["hard"], 1),
        (["good", "good", "hard"], 2),
        (["easy", "easy", "easy", "easy"], len(fc.INTERVALS_DAYS) - 1),
        (["easy", "again"], 0),
    ],
)
def test_leitner_boxes(grades, box):
    clock = Clock()
    schedule = fc.Schedule(clock=clock)
    for grade in grades:
        state = schedule.grade("gqa", grade)
    assert state.box == box
    assert state.due == clock.now + fc.INTERVALS_DAYS[box] * fc.DAY_S
    assert state.reviews == len(grades)
    assert state.lapses == grades.count("again")


def test_a_reviewed_card_comes_back_when_due():
    clock = Clock()
    schedule = fc.Schedule(clock=clock)
    schedule.grade("gqa", "good")  # box 1: one day
    assert "gqa" not in [c.id for c in schedule.due()]
    clock.now += fc.DAY_S
    assert "gqa" in [c.id for c in schedule.due()]
    schedule.grade("formula", "again")  # box 0: due at once, so it stays in the queue
    assert "formula" in [c.id for c in schedule.due()]


def test_unknown_grade_is_rejected():
    with pytest.raises(ValueError, match="again"):
        fc.Schedule().grade("gqa", "perfect")


def test_progress_is_saved_only_when_grading_and_read_back(tmp_path):
    path = tmp_path / "progress.json"
    schedule = fc.Schedule(path=path, clock=Clock())
    assert not path.exists()
    schedule.grade("gqa", "easy")
    saved = json.loads(path.read_text())
    assert saved["version"] == 1 and saved["cards"]["gqa"]["box"] == 2
    again = fc.Schedule(path=path, clock=Clock())
    assert again.state["gqa"].box == 2 and again.problem == ""


def test_a_damaged_or_old_file_does_not_break_the_widget(tmp_path):
    path = tmp_path / "progress.json"
    path.write_text("{not json")
    schedule = fc.Schedule(path=path)
    assert "started afresh" in schedule.problem
    assert all(s.box == 0 for s in schedule.state.values())
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "cards": {"retired_card": {"box": 3, "due": 0.0, "reviews": 1, "lapses": 0}},
            }
        )
    )
    schedule = fc.Schedule(path=path)
    assert schedule.problem == "" and "retired_card" not in schedule.state


def test_deck_markdown_lists_every_card():
    text = fc.deck_markdown()
    assert all(card.front in text and card.back in text for card in fc.DECK)


def test_widget_reveal_grade_and_requeue(tmp_path, capsys):
    schedule = fc.Schedule(path=tmp_path / "p.json", clock=Clock())
    w = fc.FlashcardWidget(schedule)
    assert isinstance(w.view, widgets.VBox)
    first = w.queue[0]
    assert all(b.disabled for b in w.grades.values()) and not w.reveal.disabled
    assert w.back.value == ""
    w.reveal.click()
    assert not any(b.disabled for b in w.grades.values()) and w.reveal.disabled
    assert "revisit" in w.back.value
    w.grades["again"].click()
    assert w.queue.index(first) == fc.AGAIN_GAP
    assert schedule.state[first.id].lapses == 1
    n = len(w.queue)
    w.reveal.click()
    w.grades["good"].click()
    assert len(w.queue) == n - 1
    assert (tmp_path / "p.json").exists()
    assert capsys.readouterr().err == ""


def test_widget_filters_by_group_and_reviews_all(tmp_path):
    schedule = fc.Schedule(clock=Clock())
    w = fc.FlashcardWidget(schedule)
    w.group.value = "intuition"
    assert w.queue and all(c.group == "intuition" for c in w.queue)
    for _ in range(len(w.queue)):
        w.show_answer()
        w.grade("easy")
    assert not w.queue and w.reveal.disabled and "Nothing due" in w.front.value
    w.cram.click()
    assert len(w.queue) == sum(c.group == "intuition" for c in fc.DECK)


def test_flashcard_widget_builds_without_writing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    box = fc.flashcard_widget("flashcards_progress.json")
    assert isinstance(box, widgets.VBox)
    assert list(tmp_path.iterdir()) == []


def test_head_counts_use_the_course_notation():
    """Issue 29: a count of heads is nh, as in the shape legend; h names one head's index."""
    for card in deck.DECK:
        for text in (card.front, card.back):
            assert not re.search(r"instead of h\b|\bh heads\b", text), card.id
    wide = next(card for card in deck.DECK if card.id == "wide_head")
    assert "instead of nh" in wide.back
