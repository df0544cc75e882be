"""The NAS CNN on the 8x8 digits as a table, for the multi-objective benchmark: validation error
against parameter count, each architecture trained once on the same 3 folds, so that every
optimizer and seed reads the same values (as NAS-Bench-201 serves ``benchmarks/optimizers.py``).

The space is the built-in ``nas_cnn`` task's (``trainers/builtin/nas_cnn.py`` builds every
model) cut to a grid: ``blocks`` 1-3; per block ``log2_channels_i`` 2-5 (4 to 32 channels);
``kernel`` 3 or 5, ``pool`` max or avg and ``dense`` 0 or 64 for all blocks; ReLU. That is 672
distinct architectures (a block's channels count only where the block exists; optimizers see
all three parameters). Each is trained for ``EPOCHS`` epochs with Adam (lr 3e-3, batch 64, one
torch thread, seeded) on each of foldwise's stratified 3 folds (``make_folds``, seed 0); its
row holds the mean validation error in percent, the folds' standard error and the parameter
count. At this budget depth does not pay on 8x8 images: the 3-block networks with average
pooling are a median 40 % wrong (under-trained), and 301 of the 672 lie beyond the benchmark's
reference error of 25 %, so the front is made of 1- and 2-block networks (2.8 % error at 27.8
thousand parameters, 20 % at 0.36 thousand). The table ships as
``benchmarks/results/digits_cnn.json``; rebuild it with

    .venv/bin/python -m benchmarks.digits_cnn_table             # about 20 CPU-minutes
    .venv/bin/python -m benchmarks.digits_cnn_table --limit 2 --out /tmp/t.json  # smoke
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "benchmarks" / "results" / "digits_cnn.json"
EPOCHS = 8
FOLDS = 3
MAX_BLOCKS = 3


def space() -> dict[str, dict[str, Any]]:
    """The grid as a search space (every optimizer is given exactly this)."""
    return {
        "blocks": {"type": "int", "low": 1, "high": MAX_BLOCKS},
        **{
            f"log2_channels_{i}": {"type": "int", "low": 2, "high": 5}
            for i in range(1, MAX_BLOCKS + 1)
        },
        "kernel": {"type": "categorical", "choices": [3, 5]},
        "pool": {"type": "categorical", "choices": ["max", "avg"]},
        "dense": {"type": "categorical", "choices": [0, 64]},
    }


def key(config: dict[str, Any]) -> str:
    """The architecture a configuration builds: channels of blocks it does not have dropped."""
    blocks = int(config["blocks"])
    channels = [str(2 ** int(config[f"log2_channels_{i}"])) for i in range(1, blocks + 1)]
    kernel, dense = int(config["kernel"]), int(config["dense"])
    return f"{'-'.join(channels)}|k{kernel}|{config['pool']}|d{dense}"


def architectures() -> list[dict[str, Any]]:
    """One configuration per distinct architecture (absent blocks' channels at the lowest)."""
    out = []
    for blocks in range(1, MAX_BLOCKS + 1):
        for logs in itertools.product(range(2, 6), repeat=blocks):
            for kernel, pool, dense in itertools.product([3, 5], ["max", "avg"], [0, 64]):
                config: dict[str, Any] = {"blocks": blocks}
                for i in range(1, MAX_BLOCKS + 1):
                    config[f"log2_channels_{i}"] = logs[i - 1] if i <= blocks else 2
                config.update(kernel=kernel, pool=pool, dense=dense)
                out.append(config)
    return out


def model_params(config: dict[str, Any]) -> dict[str, Any]:
    """The ``nas_cnn`` task's params for a configuration."""
    blocks = int(config["blocks"])
    params: dict[str, Any] = {
        "blocks": blocks,
        "kernel": int(config["kernel"]),
        "pool": config["pool"],
        "dense": int(config["dense"]),
        "act": "relu",
    }
    for i in range(1, blocks + 1):
        params[f"channels_{i}"] = 2 ** int(config[f"log2_channels_{i}"])
    return params


def train(config: dict[str, Any]) -> dict[str, float]:
    """Train the architecture on each fold; its mean validation error (%), the folds' standard
    error and its parameter count."""
    import torch

    from foldwise.trainers.builtin.nas_cnn import build_model

    X, y, folds = _data()
    errors = []
    for fold, (train_idx, val_idx) in enumerate(folds):
        torch.manual_seed(fold)
        model = build_model(model_params(config))
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        order = np.random.default_rng(fold)
        for _ in range(EPOCHS):
            shuffled = order.permutation(train_idx)
            for start in range(0, len(shuffled), 64):
                batch = torch.as_tensor(shuffled[start : start + 64])
                loss = torch.nn.functional.cross_entropy(model(X[batch]), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            wrong = (model(X[val_idx]).argmax(1) != y[val_idx]).float().mean().item()
        errors.append(100.0 * wrong)
    n_params = sum(p.numel() for p in build_model(model_params(config)).parameters())
    return {
        "error": float(np.mean(errors)),
        "se": float(np.std(errors, ddof=1) / math.sqrt(len(errors))),
        "params": n_params,
    }


@functools.cache
def _data() -> tuple[Any, Any, list[tuple[Any, Any]]]:
    import torch

    from foldwise.trainers.builtin.digits_data import load_digits_images
    from foldwise.trainers.splits import make_folds

    X, y = load_digits_images({})
    folds = make_folds(len(y), FOLDS, 0, scheme="stratified", targets=y)
    as_tensors = [(torch.as_tensor(f[0]), torch.as_tensor(f[1])) for f in folds]
    return torch.as_tensor(X), torch.as_tensor(y), as_tensors


@functools.cache
def load_table(path: Path = TABLE) -> dict[str, dict[str, float]]:
    """The shipped table, by architecture key; a missing row is a rebuild's business, so it
    raises instead of guessing."""
    rows = json.loads(path.read_text())["rows"]
    expected = {key(c) for c in architectures()}
    if set(rows) != expected:
        raise RuntimeError(f"{path}: {len(expected ^ set(rows))} architectures missing or extra")
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TABLE)
    parser.add_argument("--limit", type=int, default=None, help="train only the first N")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    chosen = architectures()[: args.limit]
    rows: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    for n, config in enumerate(chosen, 1):
        rows[key(config)] = train(config)
        if n % 50 == 0:
            print(f"  {n}/{len(chosen)} in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"epochs": EPOCHS, "folds": FOLDS, "optimizer": "Adam lr 3e-3, batch 64"}
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=0, sort_keys=True))
    errors = [r["error"] for r in rows.values()]
    params = [r["params"] for r in rows.values()]
    print("| architectures | error % (min / median / max) | parameters (min / max) | seconds |")
    print("|---:|---|---|---:|")
    print(
        f"| {len(rows)} | {min(errors):.2f} / {float(np.median(errors)):.2f} / "
        f"{max(errors):.2f} | {min(params)} / {max(params)} | "
        f"{time.perf_counter() - started:.0f} |"
    )


if __name__ == "__main__":
    main()
