"""A task that fails to describe itself with an exception of its own class (its ``kind`` raises
it). The service must learn why as text: the exception, unpickled in the service's process,
would import this module there."""

from __future__ import annotations

from tests.user_tasks.tiny import build_model, load_data


class OwnError(Exception):
    """Defined only here."""


class Task:
    load_data = staticmethod(load_data)
    build_model = staticmethod(build_model)

    @property
    def kind(self) -> str:
        raise OwnError("own_error refuses to say its kind")
