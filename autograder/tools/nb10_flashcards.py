"""Flashcards for spaced review before an interview: a Leitner schedule and a widget over notebook
10's deck (:mod:`.nb10_deck`).

The widget is plain ipywidgets (buttons and HTML, no JavaScript of our own, no CDN), so it works
offline in JupyterLab, VS Code and Colab. The schedule is a Leitner system with six boxes: a new
card starts in box 0; "again" sends it back to box 0 (and shows it again a few cards later),
"hard" keeps it in its box, "good" moves it up one box and "easy" two. A card in box ``n`` is due
``INTERVALS_DAYS[n]`` days after its last review. The schedule lives in memory and, when a path is
given, in a small JSON file next to the notebook, written only when you grade a card.
"""

from __future__ import annotations

import html
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import ipywidgets as widgets

from autograder.tools.nb10_deck import DECK, GROUPS, Card

INTERVALS_DAYS = (0, 1, 2, 4, 8, 16)
GRADES = ("again", "hard", "good", "easy")
AGAIN_GAP = 3  # a card graded "again" comes back after this many other cards
DAY_S = 86_400.0


@dataclass
class CardState:
    """Where a card stands: its Leitner box, when it is due (epoch seconds), its history."""

    box: int = 0
    due: float = 0.0
    reviews: int = 0
    lapses: int = 0


class Schedule:
    """A Leitner schedule over ``deck``, saved to ``path`` (JSON) after every grade if given."""

    def __init__(
        self,
        deck: Sequence[Card] = DECK,
        path: str | os.PathLike | None = None,
        clock: Callable[[], float] = time.time,
    ):
        self.deck = {card.id: card for card in deck}
        self.path = None if path is None else Path(path)
        self.clock = clock
        self.state = {card_id: CardState() for card_id in self.deck}
        self.problem = ""
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        try:
            saved = json.loads(self.path.read_text(encoding="utf-8"))["cards"]
            loaded = {k: CardState(**v) for k, v in saved.items() if k in self.deck}
        except (OSError, ValueError, KeyError, TypeError) as err:
            self.problem = f"could not read {self.path.name} ({type(err).__name__}); started afresh"
            return
        self.state.update(loaded)

    def save(self) -> None:
        """Write the schedule to ``path`` (nothing without a path)."""
        if self.path is None:
            return
        data = {"version": 1, "cards": {k: asdict(s) for k, s in self.state.items()}}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)

    def due(self, group: str | None = None) -> list[Card]:
        """Cards due now (new ones included), most overdue first, in deck order on ties."""
        now = self.clock()
        order = {card_id: i for i, card_id in enumerate(self.deck)}
        ids = [k for k, s in self.state.items() if s.due <= now]
        ids = [k for k in ids if group in (None, "all", self.deck[k].group)]
        return [self.deck[k] for k in sorted(ids, key=lambda k: (self.state[k].due, order[k]))]

    def grade(self, card_id: str, grade: str) -> CardState:
        """Record a review: "again", "hard", "good" or "easy"; return the card's new state."""
        if grade not in GRADES:
            raise ValueError(f"grade must be one of {GRADES}, got {grade!r}")
        s = self.state[card_id]
        s.reviews += 1
        if grade == "again":
            s.box, s.lapses = 0, s.lapses + 1
        elif grade == "hard":
            s.box = max(s.box, 1)
        else:
            s.box = min(s.box + (1 if grade == "good" else 2), len(INTERVALS_DAYS) - 1)
        s.due = self.clock() + INTERVALS_DAYS[s.box] * DAY_S
        self.save()
        return s

    def summary(self) -> str:
        boxes = [sum(s.box == b for s in self.state.values()) for b in range(len(INTERVALS_DAYS))]
        return " · ".join(f"box {b}: {n}" for b, n in enumerate(boxes))


def deck_markdown(deck: Sequence[Card] = DECK) -> str:
    """The whole deck as Markdown, to read or print without widgets."""
    return "\n\n".join(
        f"**{i}. {c.front}**  \n{c.back}  \n*{c.group} · revisit {c.revisit}*"
        for i, c in enumerate(deck, 1)
    )


def _html(text: str, size: str = "1.05em") -> str:
    return f"<div style='font-size:{size}; line-height:1.4'>{html.escape(text)}</div>"


class FlashcardWidget:
    """Shows due cards one at a time: reveal, then grade; keeps a session queue."""

    def __init__(self, schedule: Schedule):
        self.schedule = schedule
        self.queue: list[Card] = []
        self.front, self.back, self.status = widgets.HTML(), widgets.HTML(), widgets.HTML()
        self.reveal = widgets.Button(description="Show answer", button_style="info")
        self.reveal.on_click(lambda _: self.show_answer())
        self.grades = {g: widgets.Button(description=g) for g in GRADES}
        for g, button in self.grades.items():
            button.on_click(lambda _, g=g: self.grade(g))
        self.group = widgets.Dropdown(options=list(GROUPS), value="all", description="cards")
        self.group.observe(lambda _: self.restart(), names="value")
        self.cram = widgets.Button(description="Review all now")
        self.cram.on_click(lambda _: self.restart(everything=True))
        self.view = widgets.VBox(
            [
                widgets.HBox([self.group, self.cram]),
                self.front,
                self.reveal,
                self.back,
                widgets.HBox(list(self.grades.values())),
                self.status,
            ]
        )
        self.restart()

    def restart(self, everything: bool = False) -> None:
        group = self.group.value
        if everything:
            cards = self.schedule.deck.values()
            self.queue = [c for c in cards if group in ("all", c.group)]
        else:
            self.queue = self.schedule.due(group)
        self._show()

    def _show(self) -> None:
        self.back.value = ""
        for button in self.grades.values():
            button.disabled = True
        if not self.queue:
            self.front.value = _html(
                "Nothing due in this selection. Come back tomorrow, or press 'Review all now'."
            )
            self.reveal.disabled = True
        else:
            card = self.queue[0]
            self.front.value = _html(card.front, "1.15em")
            self.reveal.disabled = False
        note = f" · {self.schedule.problem}" if self.schedule.problem else ""
        self.status.value = _html(
            f"{len(self.queue)} to go · {self.schedule.summary()}{note}", "0.85em"
        )

    def show_answer(self) -> None:
        if not self.queue:
            return
        card = self.queue[0]
        self.back.value = _html(card.back) + _html(
            f"{card.group} · revisit {card.revisit}", "0.85em"
        )
        self.reveal.disabled = True
        for button in self.grades.values():
            button.disabled = False

    def grade(self, grade: str) -> None:
        if not self.queue:
            return
        card = self.queue.pop(0)
        self.schedule.grade(card.id, grade)
        if grade == "again":
            self.queue.insert(min(AGAIN_GAP, len(self.queue)), card)
        self._show()


def flashcard_widget(
    path: str | os.PathLike | None = None, deck: Sequence[Card] = DECK
) -> widgets.VBox:
    """The flashcard widget over ``deck``; progress saved to ``path`` (JSON) when given."""
    return FlashcardWidget(Schedule(deck, path)).view
