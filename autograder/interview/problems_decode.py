"""Problems of the serving loop an LLM engineer is asked about: a sampling step (temperature,
top-k, top-p), the decode loop around it, and a batch of prompts padded on the left with its
masks and positions.

No notebook exercise grades these, so the checks are here, written as the course's are:
``check_*(fn, *, seed, thorough)``, visible cases at seed 0 and more at seed 1, each failure one
sentence that names the classic mistake when the answer matches it (the oracle with one knob
turned). Shape legend: ``B`` batch, ``V`` vocabulary, ``L`` padded length.
"""

from __future__ import annotations

import torch

from .task import Problem, Task, Variant, course_check, fail, one_tensor, tensors

NAME, GENERATE = "sample_filter", "generate"
INF = float("inf")


def make_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """One integer in ``[low, high]``."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def randn(gen: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> bool:
    if actual.shape != expected.shape:
        return False
    return torch.allclose(actual.to(expected.dtype), expected, atol=atol, rtol=1e-5)


def call(fn, name: str, args: tuple, kwargs: dict | None = None):
    """The candidate's ``fn(*args, **kwargs)``; an exception it raises, said in one sentence."""
    __tracebackhide__ = True
    try:
        return fn(*args, **(kwargs or {}))
    except Exception as error:
        first = (str(error).splitlines() or [""])[0][:160]
        fail(f"`{name}` raised {type(error).__name__}: {first}")


# ------------------------------------------------------------------------------ sampling


def filtered(logits, temperature=1.0, top_k=0, top_p=1.0, *, cross=True, p_first=False):
    """Hugging Face's order: logits / temperature (0: greedy), top-k, top-p (the token that
    crosses p kept unless ``cross=False``); ``p_first`` applies top-p before the temperature."""
    x = logits.double()
    if temperature == 0:
        return x.masked_fill(x < x.amax(-1, keepdim=True), -INF)
    x = x if p_first else x / temperature
    if top_k:
        x = x.masked_fill(x < x.topk(top_k, dim=-1).values[..., -1:], -INF)
    if top_p < 1:
        ordered, index = x.sort(-1, descending=True)
        probs = ordered.softmax(-1)
        before = probs.cumsum(-1) - (probs if cross else 0)
        drop = before >= top_p if cross else before > top_p
        x = x.masked_fill(drop.scatter(-1, index, drop), -INF)
    return x / temperature if p_first else x


_MISTAKES = {
    "top-p drops the token that crosses p: keep the smallest set whose probability reaches p, "
    "the crossing token included.": {"cross": False},
    "top-p ran on the logits before the temperature: divide by the temperature first, then "
    "filter.": {"p_first": True},
}

_CASES = {  # name: [(temperature, top_k, top_p)], visible first
    "temperature": [(0.7, 0, 1.0), (1.5, 0, 1.0), (0, 0, 1.0)],
    "top k": [(1.0, 3, 1.0), (0.5, 1, 1.0)],
    "top p": [(1.0, 0, 0.8), (0.6, 0, 0.5)],
    "all three": [(0.8, 5, 0.9), (1.3, 4, 0.7)],
}


def _logits(gen, thorough: bool) -> torch.Tensor:
    B, V = (3, 11) if not thorough else (randint(gen, 1, 4), randint(gen, 6, 40))
    return 2 * randn(gen, B, V)  # (B, V), no ties


def _same_logits(got: torch.Tensor, want: torch.Tensor) -> bool:
    kept = torch.isfinite(want)
    if not torch.equal(torch.isfinite(got), kept):
        return False
    return close(got[kept].double(), want[kept], atol=1e-4)


def _matches(got, logits, args: dict, as_probs: bool, **knobs) -> bool:
    """Whether ``got`` is the oracle's answer with ``knobs`` turned."""
    want = filtered(logits, **args, **knobs)
    if as_probs:
        return close(got.double(), want.softmax(-1), atol=1e-5)
    return _same_logits(got, want)


_DIFFERS = "differs from dividing by the temperature, then top-k, then top-p."


def _sampling_check(case: str, as_probs: bool):
    def check(fn, *, seed: int = 0, thorough: bool = False) -> None:
        __tracebackhide__ = True
        gen = make_generator(seed)
        for temperature, top_k, top_p in _CASES[case]:
            logits = _logits(gen, thorough)
            args = {"temperature": temperature, "top_k": top_k, "top_p": top_p}
            said = f"`{NAME}(logits, temperature={temperature}, top_k={top_k}, top_p={top_p})`"
            got = one_tensor(call(fn, NAME, (logits.clone(),), args), NAME, "a tensor")
            if tuple(got.shape) != tuple(logits.shape):
                fail(f"{said} returned shape {tuple(got.shape)}; it keeps (B, V).")
            if _matches(got, logits, args, as_probs):
                continue
            if as_probs and not close(got.sum(-1).double(), torch.ones(len(got)), atol=1e-4):
                fail(f"{said}: the probabilities do not sum to 1: renormalise after filtering.")
            why = next(
                (
                    w
                    for w, knob in _MISTAKES.items()
                    if _matches(got, logits, args, as_probs, **knob)
                ),
                _DIFFERS,
            )
            hotter = logits * temperature**2  # divided by the temperature: multiplied by it
            if temperature and _matches(got, hotter, args, as_probs):
                why = "the temperature multiplies the logits: divide them by it."
            fail(f"{said}: {why}")

    check.__name__ = f"check_{case.replace(' ', '_')}"
    return check


def _sampling_task(as_probs: bool, contract: str) -> Task:
    graders = tuple(course_check(_sampling_check(c, as_probs), lambda fn: fn) for c in _CASES)
    return Task(
        NAME, f"def {NAME}(logits, temperature=1.0, top_k=0, top_p=1.0):", contract, graders
    )


_SAMPLING = (
    "`logits` (B, V), float. Divide by `temperature` (0 means greedy: only the largest logit "
    "survives, undivided), keep the `top_k` largest (0: all), then keep the smallest set of "
    "tokens, most likely first, whose probability reaches `top_p` (the token that crosses it "
    "included; 1.0: all). Do not change `logits`."
)


def _step_model(gen, V: int):
    table = randn(gen, V, V)

    def step(ids):  # (B, L) -> (B, V): the next token's logits, a toy bigram model
        return 3 * table[ids[:, -1]] + 0.1 * ids.shape[1]

    return step


def reference_generate(step, prompt, max_new_tokens, temperature, top_k, top_p, eos_id, gen):
    ids, done = prompt.clone(), torch.zeros(len(prompt), dtype=torch.bool)
    for _ in range(max_new_tokens):
        x = filtered(step(ids), temperature, top_k, top_p)
        if temperature == 0:
            token = x.argmax(-1)
        else:
            token = torch.multinomial(x.softmax(-1).float(), 1, generator=gen)[:, 0]
        if eos_id is not None:
            token = token.masked_fill(done, eos_id)
            done |= token == eos_id
        ids = torch.cat([ids, token[:, None]], dim=1)
        if eos_id is not None and bool(done.all()):
            break
    return ids


def check_generate(fn, *, seed: int = 0, thorough: bool = False) -> None:
    __tracebackhide__ = True
    gen = make_generator(seed)
    V = 9 + (randint(gen, 0, 8) if thorough else 0)
    step = _step_model(gen, V)
    prompt = torch.randint(0, V, (3, 4), generator=gen)
    cases = [(0, 0, 1.0, None), (0.9, 4, 0.9, None), (0, 0, 1.0, int(prompt[0, -1]))]
    for temperature, top_k, top_p, eos in cases:
        kwargs = dict(temperature=temperature, top_k=top_k, top_p=top_p, eos_id=eos)
        torch_gen = torch.Generator().manual_seed(seed)
        want = reference_generate(step, prompt, 6, temperature, top_k, top_p, eos, torch_gen)
        listed = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        said = f"`{GENERATE}(step, prompt (3, 4), 6, {listed})`"
        got = call(
            fn,
            GENERATE,
            (step, prompt.clone(), 6),
            kwargs | {"generator": torch.Generator().manual_seed(seed)},
        )
        got = one_tensor(got, GENERATE, "the token ids")
        if tuple(got.shape) != tuple(want.shape):
            fail(
                f"{said} returned shape {tuple(got.shape)} where {tuple(want.shape)} is right"
                + (
                    ": stop once every row has emitted eos_id, and pad finished rows with it."
                    if eos is not None
                    else "."
                )
            )
        if not torch.equal(got, want):
            fail(
                f"{said} returned other tokens: "
                + (
                    "greedy takes the argmax of each step's logits."
                    if temperature == 0 and eos is None
                    else "a finished row keeps emitting eos_id."
                    if eos is not None
                    else "draw each step with one `torch.multinomial(probs, 1, "
                    "generator=generator)` over the filtered probabilities (B, V)."
                )
            )


SAMPLING = Problem(
    "sampling",
    "A sampling step: temperature, top-k, top-p",
    "the serving loop, beside notebook 10's follow-ups",
    "Write the step that turns a model's next-token logits into what is sampled from.",
    (
        Variant(
            "logits",
            _sampling_task(
                False,
                f"{_SAMPLING} Return the filtered logits (B, V): the survivors divided by the "
                "temperature, `-inf` elsewhere (Hugging Face's logits warpers).",
            ),
        ),
        Variant(
            "probs",
            _sampling_task(
                True,
                f"{_SAMPLING} Return the probabilities (B, V) to sample from: 0 for the tokens "
                "filtered out, the rest renormalised.",
            ),
        ),
    ),
    Task(
        GENERATE,
        "def generate(step, prompt, max_new_tokens, temperature=1.0, top_k=0, top_p=1.0, "
        "eos_id=None, generator=None):",
        "Now the loop: `step(ids)` maps ids (B, L) to the next token's logits (B, V). Append "
        "`max_new_tokens` tokens to `prompt` (B, L0) and return the ids. Temperature 0 is "
        "greedy (argmax); otherwise draw with one `torch.multinomial(probs, 1, "
        "generator=generator)` per step over the filtered probabilities (B, V), in the order "
        "temperature, top-k, top-p. A row that has emitted `eos_id` keeps emitting it, and the "
        "loop stops early once every row has.",
        (course_check(check_generate, lambda fn: fn),),
    ),
    ("sqrt_dk", "complexity"),
    written=("sampling_order", "kv_cache_cost"),
    numeric=("top_p_kept", "decode_ms_h100"),
    box_minutes=20,
)

# ---------------------------------------------------------------------------- left padding

PAD = "left_pad"


def _prompts(gen, thorough: bool) -> list[list[int]]:
    lengths = [3, 7, 5, 1] if not thorough else [randint(gen, 1, 9) for _ in range(4)]
    return [[randint(gen, 1, 50) for _ in range(n)] for n in lengths]


def padded(prompts, pad_id: int):
    """``(ids, mask, positions)`` of ``prompts`` padded on the left, Hugging Face's way."""
    L = max(map(len, prompts))
    ids = torch.tensor([[pad_id] * (L - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (L - len(p)) + [1] * len(p) for p in prompts])
    return ids, mask, (mask.cumsum(-1) - 1).clamp(min=0)


def _allowed(mask: torch.Tensor) -> torch.Tensor:
    """(B, 1, L, L): causal, and the key not a pad."""
    L = mask.shape[1]
    return mask.bool()[:, None, None, :] & torch.ones(L, L, dtype=torch.bool).tril()


def _four_d(mask: torch.Tensor) -> torch.Tensor:
    allowed = _allowed(mask)
    empty = ~allowed.any(-1, keepdim=True)  # pad queries: themselves only, so no NaN
    return allowed | (empty & torch.eye(mask.shape[1], dtype=torch.bool))


def _expect_ids(said: str, got: torch.Tensor, ids: torch.Tensor, prompts, pad_id: int) -> None:
    __tracebackhide__ = True
    if tuple(got.shape) != tuple(ids.shape):
        fail(f"{said} gave input_ids of shape {tuple(got.shape)}: (B, L), L the longest prompt.")
    right = torch.tensor([p + [pad_id] * (ids.shape[1] - len(p)) for p in prompts])
    if torch.equal(got, right) and not torch.equal(got, ids):
        fail(
            f"{said}: the pads are on the right: a decoder-only model pads on the left, so "
            "every row's last token is at the end."
        )
    if not torch.equal(got, ids):
        fail(f"{said}: input_ids are not the prompts padded on the left with pad_id.")


def _expect_four_d(said: str, got: torch.Tensor, mask: torch.Tensor) -> None:
    __tracebackhide__ = True
    want = _four_d(mask)
    if tuple(got.shape) != tuple(want.shape) or got.dtype != torch.bool:
        fail(f"{said} gave a mask {got.dtype} {tuple(got.shape)}: (B, 1, L, L) bool.")
    if torch.equal(got, _allowed(mask)):
        fail(f"{said}: a pad query's row has no key, so its softmax is NaN: let it see itself.")
    if not torch.equal(got, want):
        fail(
            f"{said}: query i may attend to key j when j ≤ i and j is not a pad (a pad query "
            "to itself alone)."
        )


def _expect_positions(said: str, got: tuple, mask: torch.Tensor, positions) -> None:
    __tracebackhide__ = True
    if not torch.equal(got[0].long(), mask):
        fail(f"{said}: attention_mask should be 1 on the prompts' tokens, 0 on the pads.")
    if torch.equal(got[1].long(), torch.arange(mask.shape[1]).expand_as(mask)):
        fail(
            f"{said}: position_ids count from the padded row's start: count from 0 at each "
            "prompt's first real token (cumsum of the mask − 1)."
        )
    if not torch.equal(got[1].long(), positions):
        fail(f"{said}: position_ids should be cumsum(attention_mask) − 1, and 0 on the pads.")


def _check_pad(four_d: bool):
    what = ("input_ids", "mask") if four_d else ("input_ids", "attention_mask", "position_ids")

    def check_left_padding(fn, *, seed: int = 0, thorough: bool = False) -> None:
        __tracebackhide__ = True
        gen = make_generator(seed)
        for pad_id in (0, 99):
            prompts = _prompts(gen, thorough)
            ids, mask, positions = padded(prompts, pad_id)
            said = f"`{PAD}(prompts of lengths {[len(p) for p in prompts]}, pad_id={pad_id})`"
            got = tensors(call(fn, PAD, ([list(p) for p in prompts], pad_id)), PAD, what)
            _expect_ids(said, got[0], ids, prompts, pad_id)
            if four_d:
                _expect_four_d(said, got[1], mask)
            else:
                _expect_positions(said, got[1:], mask, positions)

    return check_left_padding


def check_next_step(fn, *, seed: int = 0, thorough: bool = False) -> None:
    __tracebackhide__ = True
    gen = make_generator(seed)
    _, mask, _ = padded(_prompts(gen, thorough), 0)
    got = tensors(
        call(fn, "next_step", (mask.clone(),)), "next_step", ("attention_mask", "position_ids")
    )
    want = torch.cat([mask, torch.ones(len(mask), 1, dtype=mask.dtype)], 1)
    if tuple(got[0].shape) != tuple(want.shape) or not torch.equal(got[0].long(), want):
        fail("`next_step`'s attention_mask should be the old one with a column of ones appended.")
    if tuple(got[1].shape) != (len(mask), 1) or not torch.equal(
        got[1].long(), mask.sum(1, keepdim=True)
    ):
        fail(
            "`next_step`'s position_ids should be each row's count of real tokens so far, (B, 1): "
            "positions count from the first real token, not from the padded row's start."
        )


_PAD = (
    "`prompts` is a list of B token-id lists of different lengths; pad them **on the left** "
    "with `pad_id` to the longest length L, as decoder-only generation does."
)

LEFT_PADDING = Problem(
    "left_padding",
    "Batching prompts with left padding and its masks",
    "notebook 03's masks, for serving",
    "Batch prompts of different lengths for generation.",
    (
        Variant(
            "hf",
            Task(
                PAD,
                "def left_pad(prompts, pad_id):",
                f"{_PAD} Return `(input_ids, attention_mask, position_ids)`, int64 (B, L): the "
                "mask 1 on real tokens and 0 on pads; positions counting from 0 at each "
                "prompt's first real token, 0 on pads.",
                (course_check(_check_pad(False), lambda fn: fn),),
            ),
        ),
        Variant(
            "four_d",
            Task(
                PAD,
                "def left_pad(prompts, pad_id):",
                f"{_PAD} Return `(input_ids, mask)`: int64 ids (B, L) and the attention mask "
                "(B, 1, L, L) bool, True where query i may attend to key j: causal and j not a "
                "pad; a pad query attends to itself alone (no row without a key).",
                (course_check(_check_pad(True), lambda fn: fn),),
            ),
        ),
    ),
    Task(
        "next_step",
        "def next_step(attention_mask):",
        "Now decode one more token for the batch: from the (B, L) 0/1 `attention_mask`, return "
        "`(attention_mask, position_ids)`: the mask (B, L + 1) with the new token's column of "
        "ones, and the new token's positions (B, 1), int64.",
        (course_check(check_next_step, lambda fn: fn),),
    ),
    ("mask_after_softmax", "complexity"),
    written=("left_padding", "cache_mask"),
    numeric=("left_pad_position",),
    box_minutes=15,
)
