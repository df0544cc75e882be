"""The trainers: the task interface, the folds, the DDP fold runner and the built-in tasks.

``load_model`` (``from foldwise.trainers import load_model``) rebuilds a model a study saved;
it is imported on first use, so importing a trainers module does not load torch for it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_model"]


def __getattr__(name: str) -> Any:
    if name == "load_model":
        from foldwise.trainers.saved_models import load_model

        return load_model
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
