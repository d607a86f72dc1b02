"""Train notebook 07's tiny transformer on the toy tasks of :mod:`autograder.tools.toy_data`.

Shape legend: ``B`` batch, ``T`` sequence length, ``V`` vocabulary size, ``nh`` heads.

Deterministic: one seed fixes the initial weights and every training batch, and training runs on
one CPU thread (so the floating-point summation order never changes).

    python -m autograder.tools.train          # the committed checkpoint, its metadata, pruning.json
    python -m autograder.tools.train --sweep  # nh_sweep.json: nh = 1 ... 64 at d_model = 64
    python -m autograder.tools.train --quick   # a short run into a temporary folder (smoke test)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm.auto import tqdm

from autograder.tools import nb07_head_stats, toy_data
from autograder.tools.tiny_model import DATA_DIR, ModelConfig, TinyTransformer, save_checkpoint
from autograder.torch_helpers import one_thread

SEED = 0
STEPS = 2000
BATCH_SIZE = 64
LR = 5e-3
EVAL_SEED, IMPORTANCE_SEED = 10_000, 20_000
SWEEP_HEADS = (1, 2, 4, 8, 16, 64)


def evaluation_batch(size: int = 1024, seed: int = EVAL_SEED) -> toy_data.Batch:
    """Held-out sequences: the training batches use other seeds."""
    return toy_data.make_batch(size, seed)


@torch.no_grad()
def evaluate(
    model: TinyTransformer, batch: toy_data.Batch, head_mask: torch.Tensor | None = None
) -> dict[str, float]:
    """Loss (all positions), accuracy on predictable positions (copy and recall), filler loss.

    ``filler_loss`` is the mean loss on filler letters: at best ln 4 = 1.386 nats (one of the
    topic's four letters, uniformly), if the model knows the topic. ``head_mask``
    ``(n_layers, nh)`` is passed to the model: 0 removes a head.
    """
    was_training = model.training
    model.eval()
    logits, _ = model(batch.inputs, head_mask)  # (B, T, V)
    right = logits.argmax(-1) == batch.targets  # (B, T)
    copy = batch.scored & ~batch.recall  # (B, T)
    losses = torch.nn.functional.cross_entropy(
        logits.transpose(1, 2), batch.targets, reduction="none"
    )  # (B, V, T) -> (B, T)
    topic = batch.inputs[:, 1:2] - toy_data.N_LETTERS  # (B, 1)
    filler = (
        (batch.targets < toy_data.N_LETTERS)
        & ~batch.scored
        & (batch.targets // toy_data.FILLER_PER_TOPIC == topic)
    )  # (B, T): targets that are one of the topic's own letters
    result = {
        "loss": float(losses.mean()),
        "filler_loss": float(losses[filler].mean()),
        "accuracy": float(right[batch.scored].float().mean()),
        "copy_accuracy": float(right[copy].float().mean()),
        "recall_accuracy": float(right[batch.recall].float().mean()),
    }
    model.train(was_training)
    return result


@dataclass
class TrainResult:
    model: TinyTransformer
    losses: list[float] = field(default_factory=list)  # training loss at every step
    evals: list[dict] = field(default_factory=list)  # {"step", "loss", "accuracy", ...}
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # process CPU time (what an idle machine would take, roughly)


def train(
    config: ModelConfig | None = None,
    steps: int = STEPS,
    batch_size: int = BATCH_SIZE,
    lr: float = LR,
    seed: int = SEED,
    eval_every: int = 0,
    eval_batch: toy_data.Batch | None = None,
    progress: bool = True,
) -> TrainResult:
    """Train a fresh :class:`TinyTransformer` with AdamW and a one-cycle learning rate.

    ``eval_every`` > 0 evaluates on ``eval_batch`` (default: 256 held-out sequences) every that many
    steps and at the end. The model is returned in eval mode.
    """
    config = config or ModelConfig()
    with one_thread():
        torch.manual_seed(seed)
        model = TinyTransformer(config)
        gen = torch.Generator().manual_seed(seed + 1)
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=lr, total_steps=steps, pct_start=0.1
        )
        eval_batch = eval_batch if eval_batch is not None else evaluation_batch(256)
        result = TrainResult(model)
        start, cpu_start = time.perf_counter(), time.process_time()
        bar = tqdm(range(steps), desc="training", disable=not progress, mininterval=0.5)
        for step in bar:
            model.train()
            loss = model.loss(toy_data.make_batch(batch_size, gen))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            result.losses.append(loss.item())
            if eval_every and ((step + 1) % eval_every == 0 or step + 1 == steps):
                result.evals.append({"step": step + 1, **evaluate(model, eval_batch)})
                bar.set_postfix(acc=f"{result.evals[-1]['accuracy']:.3f}")
            elif step % 50 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
        bar.close()
        result.seconds = time.perf_counter() - start
        result.cpu_seconds = time.process_time() - cpu_start
    model.eval()
    return result


def _round(x, digits: int = 4):
    if isinstance(x, dict):
        return {k: _round(v, digits) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_round(v, digits) for v in x]
    if isinstance(x, torch.Tensor):
        return _round(x.tolist(), digits)
    return round(x, digits) if isinstance(x, float) else x


def _environment() -> dict:
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def train_main_model(
    out_dir: Path,
    steps: int = STEPS,
    progress: bool = True,
    sizes: tuple[int, int, int] = (1024, 512, 10),
) -> dict:
    """Train, save the checkpoint with its metadata, and precompute the pruning study.

    ``sizes``: sequences in the evaluation set, sequences for importance and pruning, and the
    number of random pruning orders.
    """
    n_eval, n_prune, n_random = sizes
    config = ModelConfig()
    result = train(
        config, steps=steps, seed=SEED, eval_every=max(steps // 10, 1), progress=progress
    )
    model = result.model
    final = evaluate(model, evaluation_batch(n_eval))
    with torch.no_grad():
        probe = evaluation_batch(256, EVAL_SEED + 1)
        _, weights = model(probe.inputs)
        table = nb07_head_stats.head_table(weights, probe.inputs)
    suffix = "" if steps == STEPS else f" --steps {steps}"
    labels = {
        f"L{layer}H{head}": nb07_head_stats.describe_head(table, layer, head)
        for layer in range(config.n_layers)
        for head in range(config.num_heads)
    }
    metadata = {
        "seed": SEED,
        "steps": steps,
        "batch_size": BATCH_SIZE,
        "lr": LR,
        "train_seconds": result.seconds,
        "train_cpu_seconds": result.cpu_seconds,
        "eval": final,
        "eval_set": {"size": n_eval, "seed": EVAL_SEED},
        "history": result.evals,
        "head_statistics": table,
        "head_labels": labels,
        "command": "python -m autograder.tools.train" + suffix,
        "environment": _environment(),
    }
    save_checkpoint(model, _round(metadata), out_dir / "tiny_model.pt")
    importance_batch = evaluation_batch(n_prune, IMPORTANCE_SEED)
    importance = nb07_head_stats.ablation_importance(model, importance_batch)
    study = nb07_head_stats.pruning_study(model, evaluation_batch(n_prune), importance, n_random)
    pruning = {
        "importance": importance,
        "importance_set": {"size": n_prune, "seed": IMPORTANCE_SEED},
        "eval_set": {"size": n_prune, "seed": EVAL_SEED},
        **study,
    }
    (out_dir / "pruning.json").write_text(json.dumps(_round(pruning)) + "\n", encoding="utf-8")
    return _round(metadata)


def nh_sweep(
    heads: Sequence[int] = SWEEP_HEADS,
    steps: int = STEPS,
    base: ModelConfig | None = None,
    progress: bool = True,
    path: Path | None = None,
) -> dict:
    """Train one model per head count at a fixed d_model; record accuracy along the way.

    With ``path``, the JSON there is updated after every run (runs already in it for other head
    counts are kept), so a long sweep can be resumed or extended one head count at a time.
    """
    base = base or ModelConfig()
    previous = json.loads(path.read_text()) if path is not None and path.is_file() else {}
    runs = previous.get("runs", {}) if previous.get("steps") == steps else {}
    eval_batch = evaluation_batch()
    sweep = {}
    for nh in heads:
        config = replace(base, num_heads=nh)
        result = train(
            config,
            steps=steps,
            seed=SEED,
            eval_every=max(steps // 20, 1),
            eval_batch=evaluation_batch(256),
            progress=progress,
        )
        runs[str(nh)] = {
            "head_size": config.d_model // nh,
            "final": evaluate(result.model, eval_batch),
            "history": result.evals,
            "cpu_seconds": result.cpu_seconds,
        }
        ordered = {k: runs[k] for k in sorted(runs, key=int)}
        sweep = _round(
            {
                "d_model": base.d_model,
                "n_layers": base.n_layers,
                "steps": steps,
                "seed": SEED,
                "eval_set": {"size": 1024, "seed": EVAL_SEED},
                "runs": ordered,
                "command": "python -m autograder.tools.train --sweep",
                "environment": _environment(),
            }
        )
        if path is not None:
            path.write_text(json.dumps(sweep) + "\n", encoding="utf-8")
    return sweep


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m autograder.tools.train",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--sweep", action="store_true", help="run the nh sweep instead")
    parser.add_argument("--quick", action="store_true", help="a short run, for smoke tests")
    parser.add_argument(
        "--heads",
        type=int,
        nargs="+",
        default=None,
        help=f"head counts for --sweep (default {' '.join(map(str, SWEEP_HEADS))})",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help=f"output folder (default {DATA_DIR}; --quick: a temporary one)",
    )
    args = parser.parse_args(argv)
    steps = 40 if args.quick else args.steps
    with contextlib.ExitStack() as stack:
        stack.enter_context(one_thread())
        out = args.out
        if out is None and args.quick:
            out = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        out = out or DATA_DIR
        out.mkdir(parents=True, exist_ok=True)
        if args.sweep:
            heads = args.heads or ((1, 2) if args.quick else SWEEP_HEADS)
            sweep = nh_sweep(heads, steps=steps, path=out / "nh_sweep.json")
            for nh, run in sweep["runs"].items():
                print(f"nh={nh:>3} hs={run['head_size']:>3}: {run['final']}")
        else:
            sizes = (128, 64, 2) if args.quick else (1024, 512, 10)
            meta = train_main_model(out, steps=steps, sizes=sizes)
            print(
                json.dumps({k: meta[k] for k in ("eval", "train_seconds", "head_labels")}, indent=1)
            )
        print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
