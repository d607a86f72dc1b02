"""A small decoder-only transformer whose attention is any module with notebook 02's interface.

Shape legend: ``B`` batch, ``T`` sequence length, ``C`` = d_model, ``nh`` heads, ``hs`` = C // nh,
``V`` vocabulary size, ``n_layers`` blocks.

Each block is pre-LayerNorm: ``x + attn(ln1(x))`` then, unless the model is attention-only,
``x + mlp(ln2(x))``. The attention module is built as ``attention(d_model, num_heads)`` and called
as ``attn(x, mask=causal) -> (out (B, T, C), weights (B, nh, T, T))``: by default
:class:`~autograder.tools.modules.TorchMultiHeadAttention`; :func:`swap_attention` puts the
learner's own ``MultiHeadAttention`` in its place, weights copied.

Removing heads (Michel et al., 2019): a head mask ``(n_layers, nh)`` multiplies each head's output
before the output projection. Head ``h`` owns input columns ``h*hs:(h+1)*hs`` of ``out_proj``, so
scaling those columns of its weight by the mask value does exactly that, for any module with the
course's layout, without touching the module's code. The output bias is kept: it belongs to no head.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call

from autograder.tools import toy_data
from autograder.tools.modules import TorchMultiHeadAttention

DATA_DIR = Path(__file__).resolve().parent / "data"
CHECKPOINT = DATA_DIR / "tiny_model.pt"
METADATA = DATA_DIR / "tiny_model.json"


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of a :class:`TinyTransformer`; ``d_mlp = 0`` makes it attention-only."""

    vocab_size: int = toy_data.VOCAB_SIZE
    max_len: int = toy_data.SEQ_LEN
    d_model: int = 64
    num_heads: int = 4
    n_layers: int = 2
    d_mlp: int = 0
    dropout: float = 0.0


class Block(nn.Module):
    """One pre-LayerNorm transformer block around a multi-head attention module."""

    def __init__(self, config: ModelConfig, attention: type[nn.Module]):
        super().__init__()
        C = config.d_model
        self.ln1 = nn.LayerNorm(C)
        self.attn = attention(C, config.num_heads)
        self.drop = nn.Dropout(config.dropout)
        self.mlp = None
        if config.d_mlp:
            self.ln2 = nn.LayerNorm(C)
            self.mlp = nn.Sequential(
                nn.Linear(C, config.d_mlp), nn.GELU(), nn.Linear(config.d_mlp, C)
            )

    def forward(self, x, causal, gate=None):
        """``x`` (B, T, C), ``gate`` (nh,) or None -> ``(x (B, T, C), weights (B, nh, T, T))``."""
        h = self.ln1(x)  # (B, T, C)
        if gate is None:
            out, weights = self.attn(h, mask=causal)  # (B, T, C), (B, nh, T, T)
        else:
            hs = x.shape[-1] // gate.numel()
            columns = gate.to(x.dtype).repeat_interleave(hs)  # (nh,) -> (C,): hs columns per head
            w_out = self.attn.out_proj.weight * columns  # (C, C) * (C,): column j scaled
            out, weights = functional_call(
                self.attn, {"out_proj.weight": w_out}, (h,), {"mask": causal}
            )  # (B, T, C), (B, nh, T, T)
        x = x + self.drop(out)
        if self.mlp is not None:
            x = x + self.drop(self.mlp(self.ln2(x)))  # (B, T, C)
        return x, weights


class TinyTransformer(nn.Module):
    """Token and position embeddings, ``n_layers`` blocks, a final LayerNorm and an unembedding.

    ``head_mask`` (a buffer of ones, ``(n_layers, nh)``) is used when ``forward`` gets none; set an
    entry to 0 to remove that head from every later call, and back to 1 to restore it.
    """

    def __init__(self, config: ModelConfig, attention: type[nn.Module] = TorchMultiHeadAttention):
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        self.pos_emb = nn.Embedding(config.max_len, config.d_model)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config, attention) for _ in range(config.n_layers))
        self.ln_f = nn.LayerNorm(config.d_model)
        self.unembed = nn.Linear(config.d_model, config.vocab_size)
        ones = torch.ones(config.n_layers, config.num_heads)
        self.register_buffer("head_mask", ones, persistent=False)

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    def forward(self, inputs: torch.Tensor, head_mask: torch.Tensor | None = None):
        """``inputs`` (B, T) token ids -> ``(logits (B, T, V), weights)``.

        ``weights`` is a list with one ``(B, nh, T, T)`` tensor per layer. ``head_mask``
        ``(n_layers, nh)`` (default: the ``head_mask`` buffer) scales each head's output; 0 removes
        the head. Any float values work, so the loss can be differentiated with respect to it.
        """
        B, T = inputs.shape
        if T > self.config.max_len:
            raise ValueError(
                f"inputs have {T} tokens; this model reads at most {self.config.max_len}"
            )
        mask = self.head_mask if head_mask is None else head_mask.to(self.head_mask.device)
        if tuple(mask.shape) != (self.n_layers, self.num_heads):
            raise ValueError(
                f"head_mask must have shape ({self.n_layers}, {self.num_heads}), got "
                f"{tuple(mask.shape)}"
            )
        causal = torch.ones(T, T, dtype=torch.bool, device=inputs.device).tril()  # (T, T)
        positions = torch.arange(T, device=inputs.device)  # (T,)
        x = self.drop(self.tok_emb(inputs) + self.pos_emb(positions))  # (B, T, C)
        everything_on = bool((mask == 1).all()) and not mask.requires_grad
        weights = []
        for layer, block in enumerate(self.blocks):
            x, w = block(x, causal, None if everything_on else mask[layer])  # (B, T, C)
            weights.append(w)  # (B, nh, T, T)
        return self.unembed(self.ln_f(x)), weights  # (B, T, V)

    def loss(self, batch: toy_data.Batch, head_mask: torch.Tensor | None = None) -> torch.Tensor:
        """Mean next-token cross-entropy (nats) over every position of ``batch``: a scalar."""
        logits, _ = self(batch.inputs, head_mask)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten())  # (B*T, V) -> ()

    @torch.no_grad()
    def accuracy(self, batch: toy_data.Batch, head_mask: torch.Tensor | None = None) -> float:
        """Fraction of the predictable positions (``batch.scored``) predicted exactly."""
        logits, _ = self(batch.inputs, head_mask)  # (B, T, V)
        right = logits.argmax(-1) == batch.targets  # (B, T)
        return float(right[batch.scored].float().mean())


def swap_attention(model: TinyTransformer, attention: type[nn.Module]) -> TinyTransformer:
    """A copy of ``model`` whose attention modules are ``attention(d_model, nh)``, weights copied.

    ``attention`` must have the interface of notebook 02 (``q_proj``, ``k_proj``, ``v_proj``,
    ``out_proj``, each ``nn.Linear(C, C)`` with a bias). The original model is left as it is.
    """
    twin = TinyTransformer(model.config, attention).to(model.head_mask.device)
    twin.load_state_dict(model.state_dict())
    twin.head_mask.copy_(model.head_mask)
    twin.train(model.training)
    return twin


def save_checkpoint(model: TinyTransformer, metadata: dict, path: Path = CHECKPOINT) -> None:
    """Write the weights and config to ``path`` and ``metadata`` (plus config) as JSON beside it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.float32).clone() for k, v in model.state_dict().items()}
    torch.save({"config": asdict(model.config), "state_dict": state}, path)
    info = {"config": asdict(model.config), **metadata}
    path.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def load_checkpoint(
    path: Path = CHECKPOINT, attention: type[nn.Module] = TorchMultiHeadAttention
) -> TinyTransformer:
    """The model saved at ``path`` (default: the committed one), in eval mode."""
    saved = torch.load(path, map_location="cpu", weights_only=True)
    model = TinyTransformer(ModelConfig(**saved["config"]), attention)
    model.load_state_dict(saved["state_dict"])
    return model.eval()


def load_metadata(path: Path = METADATA) -> dict:
    """The JSON written next to a checkpoint: config, seed, steps, accuracy, timing."""
    return json.loads(Path(path).read_text(encoding="utf-8"))
