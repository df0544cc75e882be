"""The OpenAPI document is true: `schemathesis run --checks all` against a live service.

The service runs with its scheduler on, so studies that schemathesis creates from the documented
example run while it fuzzes; schemathesis sends an admin token (its `ignored_auth` check also
sends none and a wrong one, and expects a 401). Every check is on: no 5xx, every status code and
response body as documented, schema-violating requests refused, schema-valid ones accepted
(with the exceptions schemathesis.toml states and explains), resources gone after DELETE. The
seed is fixed so CI sees the same cases each run; run `schemathesis` by hand without it to
explore further.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from tests.live_service import ROOT, LiveService

pytestmark = pytest.mark.slow

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
EXAMPLES = {"sqlite": 60, "postgresql": 25}
"""Examples per operation. The routes are the same code on both backends: SQLite gets the deep
run, PostgreSQL a shorter one that still sends every operation its cases and runs its queries
(a database error would be a 5xx)."""


def test_schemathesis_finds_no_failure(database_url: str, tmp_path: Path) -> None:
    service = LiveService(database_url, tmp_path / "service.log", ray_num_cpus=2).start()
    try:
        result = subprocess.run(
            [
                str(SCHEMATHESIS),
                "--config-file",
                str(ROOT / "schemathesis.toml"),
                "run",
                f"{service.url}/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                str(EXAMPLES[make_url(database_url).get_backend_name()]),
                "--seed",
                "20261123",
                "--header",
                f"Authorization: Bearer {service.token}",
                "--no-color",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,
        )
        log = service.log(tail=10**9)
    finally:
        service.stop()
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "passed" in result.stdout and "failed" not in result.stdout, report
    assert "Traceback" not in log and "never retrieved" not in log, log[-6000:]
