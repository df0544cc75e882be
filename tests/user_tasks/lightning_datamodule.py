"""A Lightning task that builds its own DataLoaders (``build_datamodule``), on the digits
example's module: foldwise's loader settings do not reach them, so a study may not set them."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

from examples.tasks.lightning_digits import build_module, load_data, metrics

__all__ = ["build_datamodule", "build_module", "load_data", "metrics"]


def build_datamodule(ctx: Any) -> pl.LightningDataModule:
    return pl.LightningDataModule.from_datasets(
        train_dataset=ctx.train_dataset,
        val_dataset=ctx.val_dataset,
        batch_size=ctx.batch_size,
        num_workers=int(ctx.options.get("loader_workers", 0)),
    )
