"""Attacks on notebook 09's speculative decoding cells (section 6), as one learner would hand in.

One submission, learner ``s6_speculative``, three answers that know the public checks instead of
the rule:

- ``accept_greedy`` never compares a draft with the target: it reads how the public check lays
  out its rows (row ``b`` matching its first ``b % (k + 1)`` drafts) and only takes the argmax
  at that row, so the next token is right whenever the count is;
- ``speculative_accept`` calls the check module's own oracle, which a learner's copy of the
  course holds;
- ``tree_attention_mask`` is a table of the masks the public checks ask for (their fixed trees
  and the random ones of the hidden test's seed, computed offline), written one True at a time
  from Python positions, and the plain causal mask for any other tree.

``tests/test_hostile_serving_speculative.py`` verifies the two answers that need no grading
package in-process, and reads the class run (:mod:`hostile.class_run`) for all three.
"""

from __future__ import annotations

from autograder.checks import nb09_speculative as checks

from .trust import NB09, Attack, Edit

TARGETS = ("test_accept_greedy", "test_speculative_accept", "test_tree_attention_mask")

GREEDY_FROM_THE_LAYOUT = '''def accept_greedy(draft_tokens, target_logits):
    """The public check's rows match their first b % (k + 1) drafts: no comparison needed."""
    N, k = draft_tokens.shape
    best = target_logits.argmax(-1)  # (N, k + 1)
    n_accepted = torch.arange(N) % (k + 1)
    return n_accepted, best.gather(-1, n_accepted[:, None])[:, 0]
'''

SAMPLE_BY_THE_ORACLE = '''from autograder.checks.nb09_speculative import sample as _rule


def speculative_accept(draft_tokens, p_draft, p_target, uniforms):
    """The check's own rule, imported from the course's package."""
    return _rule(draft_tokens, p_draft, p_target, uniforms)
'''


def _public_trees() -> dict[tuple, list[tuple[int, int]]]:
    """Every ``(parents, prefix_len)`` the public checks ask for, with its True entries: what an
    adversary computes offline from the learner's copy of the checks."""
    asked: list[tuple] = []

    def record(parents, prefix_len):
        asked.append((tuple(parents), prefix_len))
        return checks.tree_mask(parents, prefix_len)

    for options in ({"seed": 0}, {"seed": 1, "thorough": True}):
        checks.check_tree_attention_mask(record, **options)
    return {
        key: [tuple(ij) for ij in checks.tree_mask(list(key[0]), key[1]).nonzero().tolist()]
        for key in asked
    }


def _tree_from_a_table() -> str:
    return f'''_MASKS = {_public_trees()!r}


def tree_attention_mask(parents, prefix_len):
    """The public checks' masks, looked up; the causal mask for any other tree."""
    n = len(parents)
    mask = torch.zeros(n, prefix_len + n, dtype=torch.bool)
    key = (tuple(parents), prefix_len)
    if key not in _MASKS:
        return torch.ones(n, prefix_len + n, dtype=torch.bool).tril(prefix_len)
    for i, j in _MASKS[key]:
        mask[i, j] = True
    return mask
'''


ATTACKS = [
    Attack(
        "s6_speculative",
        NB09,
        4,
        TARGETS,
        "accept_greedy takes its counts from the public check's row layout, speculative_accept "
        "calls the check module's oracle, tree_attention_mask looks the public trees up",
        edits=(
            Edit("answer", "accept_greedy", GREEDY_FROM_THE_LAYOUT),
            Edit("answer", "speculative_accept", SAMPLE_BY_THE_ORACLE),
            Edit("answer", "tree_attention_mask", _tree_from_a_table()),
        ),
    )
]
