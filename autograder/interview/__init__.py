"""The mock interview: a fresh problem from the whole course in a notebook of its own, a clock,
the course's checks as the interviewer, follow-ups after a pass, and a scorecard with spacing.

``python -m autograder interview`` writes the notebook (:mod:`.notebook`); its cells run
:mod:`.session`; :mod:`.bank` holds the problems, :mod:`.scorecard` what happened.
"""
