"""foldwise: hyperparameter and architecture search for PyTorch with K-fold cross-validation.

This package is the SDK and the CLI; ``pip install 'foldwise[server]'`` adds the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from foldwise.errors import ApiError, FoldwiseError, InvalidSpec, NotFound, ServiceUnavailable
from foldwise.spec import StudySpec

if TYPE_CHECKING:
    from foldwise.client import Client, Study

__version__ = "0.1.0"

__all__ = [
    "ApiError",
    "Client",
    "FoldwiseError",
    "InvalidSpec",
    "NotFound",
    "ServiceUnavailable",
    "Study",
    "StudySpec",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """``Client`` and ``Study`` load the HTTP client on first use: a fold worker imports
    ``foldwise.trainers`` (and so this package) and never talks to the service."""
    if name in ("Client", "Study"):
        from foldwise import client

        return getattr(client, name)
    raise AttributeError(f"module 'foldwise' has no attribute {name!r}")
