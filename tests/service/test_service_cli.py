"""The service's commands of the ``foldwise`` CLI (``serve``, ``db upgrade``), which the CLI
finds through the entry point ``foldwise.cli``; ``token`` has tests of its own."""

from __future__ import annotations

import os
import socket
import sys

import pytest
import typer
from typer.testing import CliRunner

from foldwise import cli
from foldwise.service import cli as service_cli
from tests.foldwise.test_cli import assert_one_line_error

runner = CliRunner()


def test_the_cli_has_the_commands_the_service_and_the_trainers_add() -> None:
    names = set(typer.main.get_group(cli.app).commands)
    assert {"serve", "db", "token", "task", "submit", "status"} <= names


def test_serve_without_the_server_extras_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # makes `import uvicorn` fail
    monkeypatch.delitem(
        sys.modules, "foldwise.service.server", raising=False
    )  # as in a new process
    result = runner.invoke(cli.app, ["serve", "--port", "8123"])
    assert_one_line_error(result, "no module 'uvicorn'", "pip install 'foldwise[server]'")


def test_serve_on_a_busy_port_says_so_before_starting_anything(tmp_path, monkeypatch):
    pytest.importorskip("foldwise.service.server")
    database = tmp_path / "foldwise.db"
    monkeypatch.setenv("FOLDWISE_DATABASE_URL", f"sqlite:///{database}")
    monkeypatch.delenv("FOLDWISE_PORT", raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = runner.invoke(cli.app, ["serve", "--host", "127.0.0.1", "--port", str(port)])
    assert_one_line_error(result, f"cannot listen on 127.0.0.1:{port}", "in use")
    assert not database.exists()  # nor Ray, nor the scheduler: nothing started before the port
    assert "FOLDWISE_PORT" not in os.environ  # the options reach the app as its settings


def test_db_upgrade_creates_the_schema(tmp_path):
    pytest.importorskip("foldwise.service.db.schema")
    url = f"sqlite:///{tmp_path / 'foldwise.db'}"
    result = runner.invoke(cli.app, ["db", "upgrade", "--database-url", url])
    assert result.exit_code == 0, result.output
    assert f"database {url} is at revision" in result.stdout
    assert (tmp_path / "foldwise.db").exists()


def test_db_upgrade_failure_is_one_line(tmp_path):
    pytest.importorskip("foldwise.service.db.schema")
    url = f"sqlite:///{tmp_path / 'missing-dir' / 'foldwise.db'}"
    assert_one_line_error(
        runner.invoke(cli.app, ["db", "upgrade", "--database-url", url]),
        "cannot upgrade the database",
    )


def test_database_passwords_are_not_printed():
    url = "postgresql+psycopg://fold:s3cret@db:5432/foldwise"
    assert service_cli._hide_password(url) == "postgresql+psycopg://fold:***@db:5432/foldwise"
