"""The settings of a grading run: what ``grade`` writes once, as JSON, and every worker reads.

Its own module, free of grading machinery: ``grade``'s parent writes it without importing
nbgrader's preprocessors or torch, which only the workers need.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class RunConfig:
    """What the parent tells every worker (written once per run as JSON)."""

    out: str
    scratch: str
    template: str
    isolation: dict
    limits: dict
    warm: bool = True
    verify: bool = True
    font_cache: str | None = None
    modules: list[str] = field(default_factory=list)
    packages: dict[str, str] = field(default_factory=dict)  # assignment -> kernel package

    @classmethod
    def load(cls, path: Path) -> RunConfig:
        return cls(**json.loads(Path(path).read_text()))
