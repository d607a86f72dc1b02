"""Notebook 07's tiny transformer, its toy data, its committed checkpoint and its training script.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from autograder.tools import nb07_head_stats, toy_data, train
from autograder.tools.tiny_model import (
    CHECKPOINT,
    DATA_DIR,
    METADATA,
    ModelConfig,
    TinyTransformer,
    load_checkpoint,
    load_metadata,
    swap_attention,
)

QUICK_STEPS = 400  # the quick reproduction: ~15 s of CPU time on one core
QUICK_ACCURACY = 0.9  # reached by the quick run (the committed model: >= 0.99)


class PlainMultiHeadAttention(nn.Module):
    """A from-scratch MHA with notebook 02's interface, as a learner would write it."""

    def __init__(self, d_model, num_heads, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None):
        key = query if key is None else key
        value = key if value is None else value
        B, T, C = query.shape
        nh, hs = self.num_heads, C // self.num_heads

        def split(x):
            return x.view(B, -1, nh, hs).transpose(1, 2)  # (B, T, C) -> (B, nh, T, hs)

        q, k, v = split(self.q_proj(query)), split(self.k_proj(key)), split(self.v_proj(value))
        scores = q @ k.transpose(-2, -1) / math.sqrt(hs)  # (B, nh, T, S)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)  # (B, nh, T, S)
        out = (weights @ v).transpose(1, 2).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.out_proj(out), weights


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model():
    return load_checkpoint()


@pytest.fixture(scope="module")
def batch():
    return train.evaluation_batch(128)


# ------------------------------------------------------------------------------- toy data


def test_batches_are_deterministic_and_shaped():
    a, b = toy_data.make_batch(8, 3), toy_data.make_batch(8, 3)
    for x, y in zip(a, b, strict=True):
        assert torch.equal(x, y)
    assert a.inputs.shape == a.targets.shape == a.scored.shape == (8, toy_data.SEQ_LEN)
    assert torch.equal(a.inputs[:, 1:], a.targets[:, :-1])
    assert (a.inputs[:, 0] == toy_data.BOS_ID).all()


def test_scored_targets_are_determined_by_the_context():
    """Each scored target is the topic (after '?') or follows the last copy of the input token."""
    batch = toy_data.make_batch(256, 7)
    tokens = torch.cat([batch.inputs, batch.targets[:, -1:]], 1)  # (B, T+1)
    for b, t in batch.scored.nonzero().tolist():
        if batch.recall[b, t]:
            assert batch.targets[b, t] == batch.inputs[b, 1]
            continue
        earlier = (tokens[b, :t] == tokens[b, t]).nonzero().flatten()
        assert len(earlier) > 0, (b, t)
        assert batch.targets[b, t] == tokens[b, int(earlier[-1]) + 1], (b, t)
    assert 0.4 < batch.scored.float().mean() < 0.7
    assert batch.recall.any(-1).float().mean() > 0.3


def test_encode_decode_round_trip():
    ids = toy_data.encode("B efg qrs qrs ? B")
    assert toy_data.decode(ids)[:3] == ["<s>", "B", "e"]
    assert toy_data.encode("<s> a").tolist() == toy_data.encode("a").tolist()
    with pytest.raises(ValueError, match="unknown tokens"):
        toy_data.encode("hello!")
    for text in toy_data.example_texts().values():
        assert len(toy_data.encode(text)) <= toy_data.SEQ_LEN


# ------------------------------------------------------------------------------ the model


def test_head_mask_equals_zeroing_the_heads_output_columns():
    torch.manual_seed(0)
    m = TinyTransformer(ModelConfig(d_model=16, num_heads=4, d_mlp=32)).double().eval()
    x = toy_data.make_batch(3, 0).inputs
    mask = torch.ones(2, 4, dtype=torch.float64)
    mask[0, 1] = mask[1, 3] = 0.0
    masked, _ = m(x, head_mask=mask)
    with torch.no_grad():
        m.blocks[0].attn.out_proj.weight[:, 4:8] = 0.0
        m.blocks[1].attn.out_proj.weight[:, 12:16] = 0.0
    zeroed, _ = m(x)
    torch.testing.assert_close(masked, zeroed)


def test_head_mask_buffer_is_the_default_and_masks_are_differentiable():
    torch.manual_seed(1)
    m = TinyTransformer(ModelConfig(d_model=16, num_heads=2)).double().eval()
    batch = toy_data.make_batch(4, 1)
    mask = torch.ones(2, 2, dtype=torch.float64)
    mask[1, 0] = 0.0
    explicit = m.loss(batch, head_mask=mask)
    m.head_mask[1, 0] = 0.0
    torch.testing.assert_close(m.loss(batch), explicit)
    m.head_mask.fill_(1.0)
    gate = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(m.loss(batch, head_mask=gate), gate)
    assert grad.shape == (2, 2) and grad.abs().sum() > 0
    with pytest.raises(ValueError, match="head_mask must have shape"):
        m(batch.inputs, head_mask=torch.ones(4))
    with pytest.raises(ValueError, match="at most"):
        m(torch.zeros(1, 40, dtype=torch.long))


def test_a_learners_attention_swapped_in_gives_the_same_model(model, batch):
    theirs = swap_attention(model, PlainMultiHeadAttention)
    assert all(isinstance(b.attn, PlainMultiHeadAttention) for b in theirs.blocks)
    with torch.no_grad():
        ref_logits, ref_weights = model(batch.inputs)
        logits, weights = theirs(batch.inputs)
        mask = torch.ones(2, 4)
        mask[0, 1] = 0
        torch.testing.assert_close(
            theirs(batch.inputs, mask)[0], model(batch.inputs, mask)[0], atol=1e-4, rtol=1e-4
        )
    torch.testing.assert_close(logits, ref_logits, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(weights[1], ref_weights[1], atol=1e-5, rtol=1e-4)
    assert type(model.blocks[0].attn).__name__ == "TorchMultiHeadAttention"


# ---------------------------------------------------------------------- committed checkpoint


def test_checkpoint_is_small_and_documented():
    assert CHECKPOINT.stat().st_size <= 5 * 2**20
    meta = load_metadata()
    for key in ("seed", "steps", "eval", "train_seconds", "command", "head_statistics"):
        assert key in meta, key
    assert meta["eval"]["accuracy"] >= 0.99
    assert METADATA.is_file() and (DATA_DIR / "pruning.json").is_file()
    sweep = json.loads((DATA_DIR / "nh_sweep.json").read_text())
    assert [int(n) for n in sweep["runs"]] == list(train.SWEEP_HEADS)
    assert all("filler_loss" in run["final"] for run in sweep["runs"].values())


def test_checkpoint_reaches_its_stated_accuracy(model):
    meta = load_metadata()
    result = train.evaluate(model, train.evaluation_batch(**meta["eval_set"]))
    assert result["accuracy"] == pytest.approx(meta["eval"]["accuracy"], abs=0.002)
    assert result["recall_accuracy"] >= 0.99


def test_checkpoint_heads_are_specialised(model, batch):
    """The claims the notebook makes about the committed model's heads still hold."""
    with torch.no_grad():
        _, weights = model(batch.inputs)
    table = nb07_head_stats.head_table(weights, batch.inputs)
    assert table["previous"][0].max() > 0.7  # a previous-token head in layer 0
    assert table["induction"][1].min() > 0.5  # every layer-1 head does induction
    assert table["induction"][0].max() < 0.2  # ... and no layer-0 head does
    importance = nb07_head_stats.ablation_importance(model, batch)
    flat = importance.flatten()
    assert flat.max() > 10 * flat.median()  # heads matter very unequally


def test_pruning_json_matches_the_model():
    data = json.loads((DATA_DIR / "pruning.json").read_text())
    assert len(data["removed"]) == len(data["least_important_first"]["accuracy"]) == 9
    assert data["least_important_first"]["accuracy"][0] >= 0.99


# ---------------------------------------------------------------------------- the training


def test_training_is_deterministic():
    config = ModelConfig(d_model=16, num_heads=2)
    a = train.train(config, steps=5, batch_size=8, progress=False)
    b = train.train(config, steps=5, batch_size=8, progress=False)
    for (name, x), (_, y) in zip(
        a.model.state_dict().items(), b.model.state_dict().items(), strict=True
    ):
        assert torch.equal(x, y), name
    assert a.losses == b.losses


def test_quick_training_reproduces_a_working_model():
    """The script still makes a model of the committed quality, in miniature (well under 1 min)."""
    result = train.train(steps=QUICK_STEPS, eval_every=QUICK_STEPS, progress=False)
    assert result.evals[-1]["accuracy"] >= QUICK_ACCURACY, result.evals[-1]
    assert result.evals[-1]["recall_accuracy"] >= 0.95, result.evals[-1]


def test_script_quick_run_writes_a_checkpoint(tmp_path, capsys):
    assert train.main(["--quick", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "tiny_model.pt").is_file() and (tmp_path / "pruning.json").is_file()
    meta = json.loads((tmp_path / "tiny_model.json").read_text())
    assert meta["steps"] == 40 and "eval" in meta
    assert load_checkpoint(tmp_path / "tiny_model.pt").n_layers == 2
    assert "head_labels" in capsys.readouterr().out


def test_sweep_quick_run_extends_its_json_one_head_count_at_a_time(tmp_path):
    assert train.main(["--sweep", "--quick", "--heads", "2", "--out", str(tmp_path)]) == 0
    assert train.main(["--sweep", "--quick", "--heads", "1", "--out", str(tmp_path)]) == 0
    sweep = json.loads((tmp_path / "nh_sweep.json").read_text())
    assert list(sweep["runs"]) == ["1", "2"] and sweep["runs"]["2"]["head_size"] == 32
    assert "filler_loss" in sweep["runs"]["1"]["final"]
