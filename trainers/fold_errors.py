"""The exceptions of a fold run, which a worker raises and Ray sends back to the service.

They live apart from the code that raises them, which needs torch and scikit-learn: the service
unpickles them (``service.executor.failures`` tells them apart) without importing either.
"""

from __future__ import annotations

from typing import Any


class RankError(RuntimeError):
    """A broken fold contract whose message names the rank at fault."""


class FoldContractError(RankError):
    """A fold function broke the fold contract (a bad report, ranks at different epochs).
    Every rank raises it at the same exchange, so the ranks stay usable for the next run."""


class TrainingDiverged(FoldContractError):
    """A reported metric became NaN or infinite."""


class RankReturnedAlone(RankError):
    """This rank's fold function returned and the other ranks did not follow in time."""


class FoldStopped(Exception):
    """Raised by ``report`` once the fold was told to stop: the fold function should have
    left its loop when ``should_stop()`` said so. foldwise treats it as a normal end."""


class PeerFailed(RuntimeError):
    """Another rank's fold function raised while this rank waited for it at a report."""


class RunAbandoned(Exception):
    """The fold run was abandoned by its caller while this rank waited (it was cancelled)."""


class PeersLate(TimeoutError):
    """Some ranks did not reach an exchange in time; ``last`` is what each said last."""

    def __init__(self, missing: list[int], last: dict[int, dict[str, Any]]) -> None:
        super().__init__(f"ranks {missing} did not answer")
        self.missing, self.last = missing, last

    def __reduce__(self) -> tuple[type, tuple[list[int], dict[int, dict[str, Any]]]]:
        return type(self), (self.missing, self.last)  # its args are the message alone


class FoldTimedOut(TimeoutError):
    """A local run took longer than its ``timeout``; ``where`` says where this rank was."""

    def __init__(self, seconds: float, where: str) -> None:
        super().__init__(f"timed out after {seconds:g} s: {where}")
        self.seconds, self.where = seconds, where

    def __reduce__(self) -> tuple[type, tuple[float, str]]:
        return type(self), (self.seconds, self.where)


class SplitError(ValueError):
    """The data cannot be split as the study's ``cv`` asks; the message says why, in numbers.
    Every trial would meet it: the study fails at once."""
