"""The one exception hierarchy of the SDK and the CLI.

Every failure a user can act on is a ``FoldwiseError`` whose message is one short, complete
sentence (``InvalidSpec`` adds one line per offending field), so the CLI can print it as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

_PYDANTIC_PREFIXES = ("Value error, ", "Assertion failed, ")
_PARAM_TYPES = ("float", "int", "categorical")  # the ``type`` tags of ``foldwise.space`` params


class FoldwiseError(Exception):
    """Base class of every error the SDK raises on purpose."""


class ServiceUnavailable(FoldwiseError):
    """The service could not be reached: connection refused, a timeout, or a gateway error."""

    def __init__(self, url: str, reason: object) -> None:
        self.url = url
        super().__init__(f"cannot reach the foldwise service at {url}: {reason}")


class NotFound(FoldwiseError):
    """A study or trial that does not exist (HTTP 404)."""


class NotAuthenticated(FoldwiseError):
    """The service wants a token, or does not know the one sent (HTTP 401)."""

    def __init__(self, url: str, detail: str) -> None:
        super().__init__(
            f"{detail} ({url}): pass --token or token=..., set FOLDWISE_TOKEN, or ask an "
            "operator for one (foldwise token create NAME --role member)"
        )


class Forbidden(FoldwiseError):
    """The token may not do this: its role, or the study is someone else's (HTTP 403)."""


class ApiError(FoldwiseError):
    """Any other error answer of the service; ``detail`` is its ``{"detail": ...}`` payload."""

    def __init__(self, message: str, *, status_code: int, detail: Any = None) -> None:
        self.status_code = status_code
        self.detail = detail
        super().__init__(message)


class InvalidSpec(FoldwiseError):
    """A study spec rejected locally by ``StudySpec`` or by the service (HTTP 422).

    ``problems`` holds one ``"field.path: message"`` string per offending field.
    """

    def __init__(self, problems: Sequence[str], *, header: str = "invalid study spec") -> None:
        self.problems = list(problems)
        if len(self.problems) == 1:
            message = f"{header}: {self.problems[0]}"
        else:
            lines = "".join(f"\n  {problem}" for problem in self.problems)
            message = f"{header} ({len(self.problems)} errors):{lines}"
        super().__init__(message)

    @classmethod
    def from_validation_error(cls, error: ValidationError) -> InvalidSpec:
        """From a local pydantic ``ValidationError`` on ``StudySpec``."""
        return cls(describe_errors(error.errors(include_url=False)))

    @classmethod
    def from_detail(cls, detail: Any) -> InvalidSpec:
        """From the ``detail`` of a 422 answer: FastAPI's list of errors, or plain text."""
        if isinstance(detail, list):
            return cls(describe_errors(item for item in detail if isinstance(item, Mapping)))
        return cls([str(detail)])


def describe_errors(errors: Iterable[Mapping[str, Any]]) -> list[str]:
    """``field.path: message`` for each pydantic/FastAPI error (``loc``, ``msg``)."""
    problems = []
    for error in errors:
        path = field_path(error.get("loc", ()))
        message = str(error.get("msg", "invalid value"))
        for prefix in _PYDANTIC_PREFIXES:
            message = message.removeprefix(prefix)
        problems.append(f"{path}: {message}" if path else message)
    return problems


def field_path(loc: Sequence[Any]) -> str:
    """A dotted field path, without FastAPI's leading ``body`` and the parameter type tag.

    Pydantic puts the discriminator value into the location of a discriminated union member
    (``space.lr.float.low``); users wrote ``space.lr.low``, so that element is dropped.
    """
    parts = [str(part) for part in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    if len(parts) >= 3 and parts[0] == "space" and parts[2] in _PARAM_TYPES:
        parts = parts[:2] + parts[3:]
    return ".".join(parts)
