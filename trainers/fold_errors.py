"""The errors a fold run raises that the service tells apart (``service.executor.failures``).

They live apart from the code that raises them, which needs torch and scikit-learn, so the
service process classifies a failed fold without importing either.
"""

from __future__ import annotations


class RankError(RuntimeError):
    """A broken fold contract whose message names the rank at fault."""


class FoldContractError(RankError):
    """A fold function broke the fold contract (a bad report, ranks at different epochs).
    Every rank raises it at the same exchange, so the ranks stay usable for the next run."""


class PeerFailed(RuntimeError):
    """Another rank's fold function raised while this rank waited for it at a report."""


class SplitError(ValueError):
    """The data cannot be split as the study's ``cv`` asks; the message says why, in numbers.
    Every trial would meet it: the study fails at once."""
