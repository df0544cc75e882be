"""The SDK polls with If-None-Match against the real service: 304s reuse what it holds."""

from __future__ import annotations

from pathlib import Path

from foldwise import Client
from foldwise.schemas import Role
from foldwise.service.app import create_app
from foldwise.service.config import Settings
from foldwise.service.db.schema import upgrade_database
from foldwise.service.token_admin import create_token
from tests.served_app import serve
from tests.service.study_specs import study_spec


def test_a_polling_client_gets_304s_until_the_study_changes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sdk.db'}"
    upgrade_database(url)
    token = create_token(url, "member", Role.MEMBER)
    app = create_app(Settings(database_url=url, scheduler_enabled=False))
    with serve(app) as base, Client(base, token=token) as client:
        statuses: list[int] = []
        client._http.event_hooks["response"].append(lambda r: statuses.append(r.status_code))
        study = client.create_study(study_spec())
        first, again = client.fetch_study(study.id), client.fetch_study(study.id)
        assert again == first and statuses[-2:] == [200, 304]
        client.stop_study(study.id)  # recorded: the study changed
        assert client.fetch_study(study.id).stop_requested and statuses[-1] == 200
        assert client.fetch_trials(study.id).count == client.fetch_trials(study.id).count == 0
        assert statuses[-2:] == [200, 304]
