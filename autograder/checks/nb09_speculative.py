"""Checks for notebook 09, section 6: speculative decoding's verification, ``accept_greedy``,
``speculative_accept`` and ``tree_attention_mask``.

Shape legend: ``N`` rows (independent verifications), ``k`` draft tokens per row, ``V`` the
vocabulary, ``n`` nodes of a draft tree, ``P`` cached positions before it.

One target pass scores the last emitted token and the ``k`` drafts after it: row ``i`` of its
``k + 1`` outputs is the target's prediction for draft ``i``, and row ``k`` the token after the
last draft (the bonus). The rule written out here is the oracle: greedy verification keeps the
drafts up to the first one that differs from the target's argmax and then emits the target's
argmax there; the sampling rule (Leviathan et al. 2023, Chen et al. 2023) accepts draft ``x``
when ``u < min(1, p(x) / q(x))`` and on the first rejection samples from ``norm(max(0, p - q))``
by inverse CDF (the smallest token ``j`` with ``u < cdf[j]``), or from ``p`` itself at row
``k`` when every draft was accepted. Its proof is exact arithmetic, not sampling: on a
vocabulary of 3 with probabilities in quarters every threshold falls on a grid of twelfths, so
evaluating the learner's rule at the 12 midpoints of each uniform enumerates every outcome with
its exact probability, and the tokens it emits must be distributed as the target's.

A tree of drafts is attended with a mask: each node sees the cached prefix and its ancestors
(itself included), which is what running its root-to-node path alone, causally, gives; the
oracle is that path. Known mistakes are the rule written the wrong way (ratio upside down,
residual not clipped or not renormalised, the correction drawn from ``p``, acceptance going on
past a rejection, rows shifted by one) and the plain causal mask over the flattened tree.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from autograder.checks import operators
from autograder.torch_helpers import one_thread

from ._core import (
    call,
    describe,
    expect_pair,
    expect_unmodified,
    fail,
    make_generator,
    randint,
    randn,
    wide_draws,
)
from ._masks import expect_mask

#: Learner code needs nothing fused: argmax, gather, cumsum and comparisons.
OPERATORS = operators.DEFAULT

#: Learner-importable names that would compute these answers: none.
ANSWERS_IN_TOOLS: dict[str, str] = {}

GREEDY = "accept_greedy"
SAMPLE = "speculative_accept"
TREE = "tree_attention_mask"


def _expect_tokens(result, name: str, N: int, inputs: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair ``(n_accepted (N,), next_token (N,))`` as long tensors, or a failure."""
    __tracebackhide__ = True
    pair = expect_pair(result, name, "n_accepted", "next_token")
    for what, t in zip(("n_accepted", "next_token"), pair, strict=True):
        if tuple(t.shape) != (N,):
            fail(
                f"`{name}` returned {what} of shape {tuple(t.shape)} for inputs {inputs}: it "
                f"should hold one count or token per row, shape ({N},)."
            )
        if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
            fail(
                f"`{name}` returned {what} as {str(t.dtype).removeprefix('torch.')}: counts and "
                "token ids are integers (argmax, .sum() of a long tensor, or .long())."
            )
    return pair[0].long(), pair[1].long()


def _first(got: tuple[torch.Tensor, torch.Tensor], variants: dict[str, tuple]) -> str | None:
    """The diagnosis of the first wrong rule whose ``(n, next)`` equals ``got``."""
    return next(
        (
            why
            for why, (n, nxt) in variants.items()
            if torch.equal(got[0], n) and torch.equal(got[1], nxt)
        ),
        None,
    )


# ------------------------------------------------------------------- accept_greedy


def greedy(drafts: torch.Tensor, logits: torch.Tensor, **how) -> tuple[torch.Tensor, ...]:
    """``(n_accepted, next_token)`` of greedy verification, the right way unless ``how`` says:
    ``shift`` compares draft ``i`` with row ``i + 1``, ``all_matches`` counts every match,
    ``row`` picks the next token's row (``"last"``: row k, ``"before"``: row n - 1)."""
    k = drafts.shape[1]
    best = logits.argmax(-1)  # (N, k + 1)
    start = 1 if how.get("shift") else 0
    matches = drafts == best[:, start : start + k]  # (N, k)
    n = matches.sum(-1) if how.get("all_matches") else matches.long().cumprod(-1).sum(-1)
    row = {"last": torch.full_like(n, k), "before": (n - 1).clamp(min=0)}.get(how.get("row"), n)
    return n, best.gather(-1, row[:, None])[:, 0]


def _greedy_batch(gen, N: int, k: int, V: int):
    """Drafts ``(N, k)`` and target logits ``(N, k + 1, V)``: each row matches its first ``m``
    drafts, then differs, and half the rows match again after the miss. ``m`` comes from a
    floating draw (a random permutation's rank), so the grader's second run, which redraws
    those, lays the rows out anew: no count can be read off the layout."""
    drafts = torch.randint(0, V, (N, k), generator=gen)
    logits = randn(gen, N, k + 1, V)
    rank = torch.rand(N, generator=gen, dtype=torch.float64).argsort()  # (N,)
    again = torch.rand(N, generator=gen, dtype=torch.float64) < 0.5  # (N,)
    top, bottom = logits.amax(-1), logits.amin(-1)  # (N, k + 1)
    for b in range(N):
        m = int(rank[b]) % (k + 1)
        for i in range(k):
            agrees = i < m or (i > m and bool(again[b]))
            logits[b, i, drafts[b, i]] = top[b, i] + 1 if agrees else bottom[b, i] - 1
    return drafts, logits


@one_thread
def check_accept_greedy(accept_greedy: Callable, *, seed: int = 0, thorough: bool = False) -> None:
    """``accept_greedy(draft_tokens (N, k), target_logits (N, k + 1, V))`` returns
    ``(n_accepted (N,), next_token (N,))``: the drafts kept up to the first one that is not the
    target's argmax, and the target's argmax at the row after the last one kept."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(8, 3, 6), (6, 1, 4), (10, 4, 9)]
    configs += [(randint(gen, 2, 12), randint(gen, 1, 6), randint(gen, 2, 30)) for _ in range(3)]
    for N, k, V in configs[: 6 if thorough else 3]:
        drafts, logits = _greedy_batch(gen, N, k, V)
        args = (drafts, logits)
        before = tuple(t.clone() for t in args)
        result = call(
            accept_greedy, GREEDY, args, hint="draft_tokens is (N, k), logits (N, k+1, V)"
        )
        expect_unmodified(before, args, GREEDY)
        got = _expect_tokens(result, GREEDY, N, describe(args))
        right = greedy(drafts, logits)
        if torch.equal(got[0], right[0]) and torch.equal(got[1], right[1]):
            continue
        where = f"`{GREEDY}` with k={k} drafts"
        variants = {
            f"{where} keeps counting matches after the first mismatch: a draft after a rejected "
            "one was drafted from a wrong prefix, so stop at the first mismatch (a cumulative "
            "product of the matches, then its sum).": {"all_matches": True},
            f"{where} compares draft i with the target's row i + 1: row i of the target pass "
            "(fed the last token, then the drafts) already predicts draft i.": {"shift": True},
            f"{where} always takes the next token from the last row: that is the bonus only "
            "when every draft was accepted; after a rejection at draft n, the correction is "
            "the argmax of row n.": {"row": "last"},
            f"{where} takes the next token from row n - 1, one row early: after n accepted "
            "drafts the target's own token for position n is the argmax of row n.": {
                "row": "before"
            },
        }
        wrong = {why: greedy(drafts, logits, **how) for why, how in variants.items()}
        fail(
            _first(got, wrong)
            or f"{where} does not keep exactly the drafts before the first one that differs "
            "from target_logits.argmax(-1), with next_token the argmax of the row after them."
        )


# ------------------------------------------------------------------- speculative_accept


def _inverse_cdf(dist: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """``(N,)``: the smallest token whose cumulative probability exceeds ``u``, else the last."""
    cdf = dist.cumsum(-1)  # (N, V)
    return (cdf <= u[:, None]).sum(-1).clamp(max=dist.shape[-1] - 1)


def sample(drafts, q, p, u, **how) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n_accepted, next_token)`` of the rejection-sampling rule, the right way unless ``how``
    says: ``inverse`` takes q/p for the ratio, ``unclipped`` keeps p - q's negative part,
    ``unnormalised`` does not divide the residual by its sum, ``from_p`` draws the correction
    from p, ``all_accepts`` counts every acceptance, ``shift`` draws from the row after."""
    N, k, V = q.shape
    x = drafts[..., None]  # (N, k, 1)
    px, qx = p[:, :k].gather(-1, x)[..., 0], q.gather(-1, x)[..., 0]  # (N, k)
    ratio = qx / px if how.get("inverse") else px / qx
    accepted = u[:, :k] < ratio.clamp(max=1)  # (N, k)
    n = accepted.sum(-1) if how.get("all_accepts") else accepted.long().cumprod(-1).sum(-1)
    residual = p[:, :k] - q  # (N, k, V)
    if not how.get("unclipped"):
        residual = residual.clamp(min=0)
    if not how.get("unnormalised"):
        residual = residual / residual.sum(-1, keepdim=True)
    if how.get("from_p"):
        residual = p[:, :k]
    dists = torch.cat([residual, p[:, k:]], 1)  # (N, k + 1, V)
    row = (n + 1).clamp(max=k) if how.get("shift") else n
    dist = dists.gather(1, row[:, None, None].expand(N, 1, V))[:, 0]  # (N, V)
    return n, _inverse_cdf(dist, u[:, k])


_SAMPLE_MISTAKES = {
    "takes q(x) / p(x) for the acceptance ratio: it is min(1, p(x) / q(x)), target over draft, "
    "so that tokens the draft over-proposes are accepted less often": {"inverse": True},
    "draws the correction from p - q without clipping it at 0: the residual is max(0, p - q), "
    "the mass the target has and the draft lacks": {"unclipped": True},
    "does not renormalise the residual: divide max(0, p - q) by its sum before sampling from it": {
        "unnormalised": True
    },
    "draws the correction from the target's p: after a rejection, sampling from p counts the "
    "tokens the draft already proposed twice; sample from norm(max(0, p - q))": {"from_p": True},
    "keeps accepting after the first rejection: every draft after a rejected one was drafted "
    "from a wrong prefix, so count only the leading acceptances (a cumulative product)": {
        "all_accepts": True
    },
    "samples the next token from the row after the first rejection: after n accepted drafts, "
    "the correction comes from row n (or the bonus from p's row k when all were accepted)": {
        "shift": True
    },
}


def _probabilities(gen, N: int, rows: int, V: int, spread: float) -> torch.Tensor:
    return (spread * randn(gen, N, rows, V)).softmax(-1)


def _sample_batch(gen, N: int, k: int, V: int):
    """Drafts drawn from the draft model ``q (N, k, V)``, the target ``p (N, k + 1, V)`` near
    ``q`` in odd rows (long runs of acceptances) and far from it in even ones, uniforms
    ``(N, k + 1)``."""
    q = _probabilities(gen, N, k, V, 1.5)
    drafts = torch.multinomial(q.reshape(N * k, V), 1, generator=gen).reshape(N, k)
    near = torch.cat([q, _probabilities(gen, N, 1, V, 1.5)], 1)  # (N, k + 1, V)
    far = _probabilities(gen, N, k + 1, V, 1.5)
    odd = (torch.arange(N) % 2 == 1)[:, None, None]
    p = torch.where(odd, 0.8 * near + 0.2 * far, far)
    u = torch.rand(N, k + 1, generator=gen, dtype=torch.float64)
    return drafts, q, p, u


def _call_sample(speculative_accept, args) -> tuple[torch.Tensor, torch.Tensor]:
    __tracebackhide__ = True
    before = tuple(t.clone() for t in args)
    result = call(
        speculative_accept,
        SAMPLE,
        args,
        hint="draft_tokens (N, k), p_draft (N, k, V), p_target (N, k+1, V), uniforms (N, k+1)",
    )
    expect_unmodified(before, args, SAMPLE)
    return _expect_tokens(result, SAMPLE, args[0].shape[0], describe(args))


def _diagnose_sample(got, args, where: str) -> None:
    __tracebackhide__ = True
    wrong = {f"{where} {why}.": sample(*args, **how) for why, how in _SAMPLE_MISTAKES.items()}
    fail(
        _first(got, wrong)
        or f"{where} does not follow the rule: accept draft i while u[i] < min(1, p(x) / q(x)); "
        "at the first rejection n, the token whose cumulative probability under norm(max(0, "
        "p[n] - q[n])) first exceeds u[k] (under p[k] when all k were accepted)."
    )


_QUARTERS = [(4, 0, 0), (3, 1, 0), (2, 2, 0), (2, 1, 1), (1, 1, 2), (0, 2, 2), (1, 3, 0)]
_GRID = 12  # every threshold of a rule on quarters is a multiple of 1/12


def _quarters(gen) -> torch.Tensor:
    """A distribution over 3 tokens in quarters, its entries in a random order."""
    counts = torch.tensor(_QUARTERS[randint(gen, 0, len(_QUARTERS) - 1)], dtype=torch.float64)
    return counts[torch.randperm(3, generator=gen)] / 4


def _enumeration(q: torch.Tensor, p: torch.Tensor):
    """Every outcome of one draft (k = 1): ``(drafts (M, 1), q (M, 1, 3), p (M, 2, 3),
    uniforms (M, 2), weights (M,))``, one row per draft with ``q > 0`` and pair of grid
    midpoints, weighted by its exact probability."""
    mid = (torch.arange(_GRID, dtype=torch.float64) + 0.5) / _GRID  # (12,)
    tokens = torch.nonzero(q[0, 0] > 0)[:, 0]  # drafts the draft model can propose
    grid = torch.arange(_GRID)
    t, i, j = (
        a.reshape(-1) for a in torch.meshgrid(torch.arange(len(tokens)), grid, grid, indexing="ij")
    )
    x, M = tokens[t], t.numel()
    weights = q[0, 0, x] / _GRID**2  # (M,)
    uniforms = torch.stack([mid[i], mid[j]], -1)  # (M, 2)
    return x[:, None], q.expand(M, 1, 3), p.expand(M, 2, 3), uniforms, weights


def _emitted(n: torch.Tensor, nxt: torch.Tensor, drafts: torch.Tensor, weights: torch.Tensor):
    """The exact distribution ``(3,)`` of the first token emitted, and of the token after an
    accepted draft, ``(3,)`` in all (their sums are P(accept))."""
    first = torch.where(n >= 1, drafts[:, 0], nxt)
    second = torch.where(n >= 1, nxt, -1)
    share = [
        torch.zeros(3, dtype=torch.float64).index_add(0, t.clamp(min=0), weights * (t >= 0))
        for t in (first, second)
    ]
    return share[0], share[1]


def _check_distribution(speculative_accept, gen) -> None:
    """Exact: the first token emitted is distributed as p[0], the bonus after an accepted draft
    as P(accept) · p[1]."""
    __tracebackhide__ = True
    for _ in range(4):
        q, p = _quarters(gen)[None, None], torch.stack([_quarters(gen), _quarters(gen)])[None]
        drafts, qs, ps, uniforms, weights = _enumeration(q, p)
        args = (drafts, qs, ps, uniforms)
        n, nxt = _call_sample(speculative_accept, args)
        first, second = _emitted(n, nxt, drafts, weights)
        accepted = weights[n >= 1].sum()
        if torch.allclose(first, p[0, 0], atol=1e-12) and torch.allclose(
            second, accepted * p[0, 1], atol=1e-12
        ):
            continue
        shown = ", ".join(f"{float(v):.4f}" for v in first)
        where = (
            f"Counted exactly over every draft and uniform, `{SAMPLE}` (k=1, a vocabulary of 3) "
            f"emits its first token with probabilities [{shown}], not the target's"
        )
        if torch.allclose(first, p[0, 0], atol=1e-12):
            where = (
                f"Counted exactly over every draft and uniform, `{SAMPLE}` (k=1) emits the right "
                "first token, but the bonus after an accepted draft is not distributed as p[1]"
            )
        _diagnose_sample((n, nxt), args, where + ": it")


@one_thread
def check_speculative_accept(
    speculative_accept: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``speculative_accept(draft_tokens (N, k), p_draft (N, k, V), p_target (N, k + 1, V),
    uniforms (N, k + 1))`` returns ``(n_accepted (N,), next_token (N,))`` by the rejection
    sampling rule, and the tokens it emits are distributed exactly as the target's."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    configs = [(16, 3, 5), (8, 1, 4), (12, 5, 7)]
    configs += [(randint(gen, 4, 24), randint(gen, 1, 6), randint(gen, 2, 20)) for _ in range(3)]
    for N, k, V in configs[: 6 if thorough else 3]:
        args = _sample_batch(gen, N, k, V)
        got, right = _call_sample(speculative_accept, args), sample(*args)
        if not (torch.equal(got[0], right[0]) and torch.equal(got[1], right[1])):
            _diagnose_sample(got, args, f"`{SAMPLE}` with k={k}, V={V}")
    _check_distribution(speculative_accept, gen)


# ------------------------------------------------------------------- tree_attention_mask


def ancestors(parents: list[int], node: int) -> list[int]:
    """The path from the root to ``node``, both included."""
    path = [node]
    while parents[path[-1]] >= 0:
        path.append(parents[path[-1]])
    return path[::-1]


def tree_mask(parents: list[int], prefix: int, **how) -> torch.Tensor:
    """``(n, P + n)``: the prefix and the node's path, the right way unless ``how`` says:
    ``causal`` is the plain causal mask over the flattened tree, ``siblings`` adds every node
    that shares a parent with one on the path, ``parent_only`` keeps the parent and the node,
    ``no_self`` drops the node, ``no_prefix`` drops the cache."""
    n = len(parents)
    mask = torch.zeros(n, prefix + n, dtype=torch.bool)
    mask[:, :prefix] = not how.get("no_prefix")
    for i in range(n):
        path = ancestors(parents, i)
        if how.get("parent_only"):
            path = path[-2:]
        if how.get("siblings"):
            path = [j for j in range(n) if any(parents[j] == parents[a] for a in path)]
        if how.get("causal"):
            path = list(range(i + 1))
        for j in path:
            mask[i, prefix + j] = not (how.get("no_self") and j == i)
    return mask


_TREE_MISTAKES = {
    "is the plain causal mask over the flattened tree: node i sees every earlier node, its "
    "siblings and cousins included, which were drafted as alternatives, not as its past; "
    "keep only its ancestors": {"causal": True},
    "lets a node see its siblings (nodes with the same parent): siblings are alternatives to "
    "each other, so a node sees the prefix, its ancestors and itself only": {"siblings": True},
    "lets a node see only its parent and itself: the path from the root holds every ancestor, "
    "so walk parents up to the root": {"parent_only": True},
    "leaves out the node itself: each query attends to its own key, as the diagonal of a "
    "causal mask does": {"no_self": True},
    "leaves out the cached prefix: every draft follows the whole cache, so the first P "
    "columns are all True": {"no_prefix": True},
}


def _random_tree(gen, n: int) -> list[int]:
    """Parents of ``n`` nodes in topological order: node 0 the root, each later node a child of
    an earlier one (a bias to the last few, as draft trees go deep)."""
    return [-1] + [max(0, i - randint(gen, 1, 3)) for i in range(1, n)]


@one_thread
def check_tree_attention_mask(
    tree_attention_mask: Callable, *, seed: int = 0, thorough: bool = False
) -> None:
    """``tree_attention_mask(parents, prefix_len)`` is the ``(n, prefix_len + n)`` bool mask in
    which node ``i`` sees the cached prefix and the nodes on its path from the root, itself
    included, so that attending over the tree gives what each path alone would."""
    __tracebackhide__ = True
    gen = make_generator(seed)
    trees = [
        ([-1, 0, 0, 1, 1, 2], 3),  # a root with two children, each with children of its own
        ([-1, 0, 1, 2], 2),  # a chain: the causal mask
        ([-1, -1, 0, 1], 0),  # two roots, no cache
        ([-1, 0, 0, 0, 1, 1, 2, 4], 4),  # Medusa-like: the top-1 path is the longest
    ]
    if thorough:
        trees += [(_random_tree(gen, randint(gen, 2, 12)), randint(gen, 0, 6)) for _ in range(4)]
        trees += [
            (_random_tree(gen, n), P) for n, P in wide_draws(seed, thorough, 2, (2, 40), (0, 64))
        ]
    for parents, prefix in trees:
        args = (list(parents), prefix)
        out = call(tree_attention_mask, TREE, args, hint="the mask is (n, prefix_len + n)")
        n = len(parents)
        inputs = f"parents={parents}, prefix_len={prefix}"
        out = expect_mask(out, TREE, (n, prefix + n), inputs, {(n, n): "add the prefix's columns"})
        expected = tree_mask(parents, prefix)
        if torch.equal(out, expected):
            continue
        where = f"`{TREE}({inputs})`"
        wrong = {why: tree_mask(parents, prefix, **how) for why, how in _TREE_MISTAKES.items()}
        fail(
            next(
                (
                    f"{where} {why}."
                    for why, m in wrong.items()
                    if not torch.equal(m, expected) and torch.equal(out, m)
                ),
                f"{where}: row i must be True on the first prefix_len columns and on column "
                "prefix_len + j exactly for j on the path from the root to node i.",
            )
        )
