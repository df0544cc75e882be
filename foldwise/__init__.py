"""foldwise: hyperparameter and architecture search for PyTorch with K-fold cross-validation.

This package is the SDK and the CLI; ``pip install 'foldwise[server]'`` adds the service.
"""

from __future__ import annotations

from foldwise.client import Client, Study
from foldwise.errors import ApiError, FoldwiseError, InvalidSpec, NotFound, ServiceUnavailable
from foldwise.spec import StudySpec

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
