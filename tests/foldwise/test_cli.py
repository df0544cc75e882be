"""The CLI as a user runs it: exit codes, one-line errors, and what the commands print."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from typer.testing import CliRunner

from foldwise import cli
from foldwise.cli_output import program_name
from tests.foldwise.conftest import best_answers

runner = CliRunner()


@pytest.fixture(autouse=True)
def wide_console(monkeypatch):
    """Tables wide enough that cells are not wrapped; errors keep going to the real stderr."""
    monkeypatch.setattr(cli, "console", Console(width=200, highlight=False))
    monkeypatch.delenv("FOLDWISE_URL", raising=False)


def assert_one_line_error(result, *fragments: str, code: int = 1) -> None:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


def write_spec(tmp_path: Path, document: dict) -> str:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


def test_service_down_is_one_line_naming_the_url(dead_url):
    result = runner.invoke(cli.app, ["studies", "--url", dead_url])
    assert_one_line_error(result, f"cannot reach the foldwise service at {dead_url}")


def test_global_url_option_and_env_var(dead_url):
    result = runner.invoke(cli.app, ["--url", dead_url, "status", "3"])
    assert_one_line_error(result, dead_url)
    result = runner.invoke(cli.app, ["best", "3"], env={"FOLDWISE_URL": dead_url})
    assert_one_line_error(result, dead_url)


def test_service_down_in_a_real_process(dead_url):
    foldwise = Path(sys.executable).with_name("foldwise")
    done = subprocess.run(
        [str(foldwise), "studies", "--url", dead_url], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stdout + done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: cannot reach the foldwise service at " + dead_url)


def test_submit_missing_file(tmp_path):
    result = runner.invoke(cli.app, ["submit", str(tmp_path / "nope.yaml")])
    assert_one_line_error(result, "cannot read", "nope.yaml")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (b"name: [unclosed\n", "cannot parse {path}: not valid YAML or JSON at line 2, column 1"),
        (
            b"name: x\n  \x07: 1\n",
            "cannot parse {path}: not valid YAML or JSON at line 2, column 3",
        ),
        (b"name: \xff\n", "cannot read {path}: it is not UTF-8 text"),
    ],
)
def test_submit_unparseable_file_names_the_file(tmp_path, content, fragment):
    path = tmp_path / "broken.yaml"
    path.write_bytes(content)
    result = runner.invoke(cli.app, ["submit", str(path)])
    assert_one_line_error(result, fragment.format(path=path))
    assert "<unicode string>" not in result.stderr


@pytest.mark.parametrize(
    ("suffix", "why"),
    [
        (".json", "it is nested more than 32 levels deep"),
        (".yaml", "it is nested more than 32 levels deep"),
    ],
)
def test_submit_deeply_nested_file_is_one_line_naming_the_file(tmp_path, suffix, why):
    path = tmp_path / f"deep{suffix}"
    path.write_text("[" * 200_000 + "]" * 200_000)
    result = runner.invoke(cli.app, ["submit", str(path)])
    assert_one_line_error(result, f"cannot parse {path}: {why}")


@pytest.mark.parametrize(
    ("replace", "why"),
    [
        (('"name": "', '"name": "first", "name": "'), "name: the key 'name' is given twice"),
        (('"low": ', '"low": 0.5, "low": '), "space.lr.low: the key 'low' is given twice"),
        (('"trials": 10', '"trials": ' + "9" * 5000), "budget.trials: an integer of 5000 digits"),
        (('"name": "', '"body": 1, "body": 2, "name": "'), "body: the key 'body' is given twice"),
        (
            ('"trials": 10', '"trials": ' + "9" * 5000 + ', "x": ' + "[" * 3000 + "]" * 3000),
            "budget.x: is nested more than 32 levels deep",  # the second, long-integer pass
        ),
    ],
)
def test_json_spec_file_refuses_what_the_service_refuses(
    tmp_path, spec_dict, dead_url, replace, why
):
    # json.loads kept the last copy of a key (a YAML file, or the service, refuses it) and
    # raised a bare ValueError on an integer too long to read: a traceback
    path = tmp_path / "study.json"
    text = json.dumps(spec_dict)
    assert replace[0] in text
    path.write_text(text.replace(*replace, 1))
    result = runner.invoke(cli.app, ["submit", str(path), "--url", dead_url])
    assert_one_line_error(result, f"cannot parse {path}: {why}")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda spec: spec["parallel"].update(folds=1), "parallel.folds: "),
        (lambda spec: spec["space"]["lr"].update(low=0.5), "space.lr: low (0.5) must be below"),
        (lambda spec: spec["optimizer"].update(name="bayes"), "optimizer.name: "),
        (lambda spec: spec.update(budgett={"trials": 3}), "budgett: Extra inputs"),
    ],
)
def test_submit_bad_spec_names_the_field(tmp_path, spec_dict, dead_url, edit, field):
    edit(spec_dict)
    result = runner.invoke(cli.app, ["submit", write_spec(tmp_path, spec_dict), "--url", dead_url])
    assert_one_line_error(result, "invalid study spec: ", field)


def test_submit_spec_with_several_errors_lists_each_field(tmp_path, spec_dict):
    spec_dict["parallel"]["folds"] = 1
    spec_dict["space"] = {}
    result = runner.invoke(cli.app, ["submit", write_spec(tmp_path, spec_dict)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [
        "error: invalid study spec (2 errors):",
        "  space: the search space needs at least one parameter",
        "  parallel.folds: Input should be greater than or equal to 2",
    ]


def test_submit_prints_the_id_and_where_to_watch(stub, tmp_path, spec_dict, make_study):
    stub.handle = lambda request: (201, make_study(status="queued", finished=0))
    result = runner.invoke(cli.app, ["submit", write_spec(tmp_path, spec_dict), "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert "created study 7 (digits-mlp)" in result.stdout
    assert f"foldwise --url {stub.url} watch 7" in result.stdout


def test_submit_watch_ends_with_the_wall_time_and_the_commands_to_see_the_results(
    stub, tmp_path, spec_dict, make_study, monkeypatch
):
    monkeypatch.setattr(cli, "program_name", lambda: ".venv/bin/foldwise")
    ended = make_study(status="completed", finished=10, finished_at="2025-01-01T10:04:30Z")

    def handle(request):
        if request.method == "POST":
            return 201, make_study(status="queued", finished=0)
        return 200, ended

    stub.handle = handle
    path = write_spec(tmp_path, spec_dict)
    result = runner.invoke(cli.app, ["--url", stub.url, "submit", path, "--watch"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert f"dashboard: {stub.url}/dashboard/studies/7" in lines
    assert "study 7 took 5m30s (wall time from its submission to its end)" in lines
    tail = lines[lines.index("next:") + 1 :]
    command = f".venv/bin/foldwise --url {stub.url}"
    assert [line.split("  # ")[0].strip() for line in tail] == [
        f"{command} trials 7 --sort best",
        f"{command} status 7",
        f"{command} trials 7 --csv -o study-7-trials.csv",
    ]


def test_program_name_is_the_path_it_was_run_by_unless_that_is_on_path(tmp_path, monkeypatch):
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    script = venv_bin / "foldwise"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program_name("venv/bin/foldwise") == "venv/bin/foldwise"
    assert program_name(str(script)) == str(script)
    monkeypatch.setenv("PATH", f"{venv_bin}:/usr/bin:/bin")
    assert program_name("venv/bin/foldwise") == "foldwise"
    for other in ("foldwise", "/usr/lib/python3/pytest", "-c", "venv/bin/missing/foldwise"):
        assert program_name(other) == "foldwise"
    spaced = tmp_path / "my venv" / "foldwise"
    spaced.parent.mkdir()
    spaced.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert program_name(str(spaced)) == f"'{spaced}'"


def test_submit_in_a_real_process_suggests_the_foldwise_it_was_run_by(
    stub, tmp_path, spec_dict, make_study
):
    """``make run`` runs ``.venv/bin/foldwise``, which a new shell does not find on PATH."""
    stub.handle = lambda request: (201, make_study(status="queued", finished=0))
    foldwise = Path(sys.executable).with_name("foldwise")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [str(foldwise), "--url", stub.url, "submit", write_spec(tmp_path, spec_dict)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"watch it:  {foldwise} --url {stub.url} watch 7" in done.stdout.splitlines()


def test_submit_watch_follows_the_new_study(stub, tmp_path, spec_dict, make_study):
    def handle(request):
        if request.method == "POST":
            return 201, make_study(status="queued", finished=0)
        return 200, make_study(status="failed", finished=1, error="task 'digits_mlp' crashed")

    stub.handle = handle
    path = write_spec(tmp_path, spec_dict)
    result = runner.invoke(cli.app, ["submit", path, "--watch", "--url", stub.url])
    assert result.exit_code == 1, result.output
    assert "created study 7" in result.stdout
    assert "study 7 failed: 1/10 finished" in result.stdout
    assert "task 'digits_mlp' crashed" in result.stdout


def test_usage_errors_keep_exit_code_2():
    result = runner.invoke(cli.app, ["trials", "3", "--sort", "fastest"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_not_found(stub):
    result = runner.invoke(cli.app, ["status", "42", "--url", stub.url])
    assert_one_line_error(result, "study 42 not found")


def test_studies_table(stub, make_study):
    studies = [make_study(1, "completed", 10), make_study(2, "queued", 0)]
    stub.handle = lambda request: (200, {"data": studies, "count": 2})
    result = runner.invoke(cli.app, ["studies", "--url", stub.url, "--status", "completed"])
    assert result.exit_code == 0, result.output
    assert stub.requests[0].query["status"] == "completed"
    row = next(line for line in result.stdout.splitlines() if "completed" in line)
    for cell in ("1", "digits-mlp", "10/10", "0.1235", "gp"):
        assert cell in row


def test_status_shows_progress_and_best(stub, make_study):
    stub.handle = lambda request: (200, make_study())
    result = runner.invoke(cli.app, ["status", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert "3/10 finished (3 completed, 0 failed, 0 pruned; 2 running, 0 pending)" in result.stdout
    assert "2 trials × 5 folds × 2 workers" in result.stdout
    assert "#2 0.1235 ± 0.0042" in result.stdout


def test_trials_table_passes_filters(stub, make_trial):
    stub.handle = lambda request: (200, {"data": [make_trial(4), make_trial(1)], "count": 9})
    args = ["trials", "7", "--sort", "best", "--status", "completed", "--limit", "2"]
    result = runner.invoke(cli.app, [*args, "--url", stub.url])
    assert result.exit_code == 0, result.output
    query = stub.requests[0].query
    assert (query["sort"], query["status"], query["limit"]) == ("best", "completed", "2")
    assert "lr=0.01235 depth=2 act=relu" in result.stdout
    assert "2 of 9 trials" in result.stdout
    result = runner.invoke(cli.app, ["trials", "7", "--sort=-params.lr", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert stub.requests[1].query["sort"] == "-params.lr"


def test_trials_shows_a_pruned_trials_folds_and_reason(stub, make_study, make_trial):
    reason = "fold 2 at epoch 4: 0.52, worse than the median 0.31 of 6 other trials' runs"
    pruned = make_trial(5, 0.52, status="pruned", value_folds=3, pruned_reason=reason)

    def handle(request):
        if request.path == "/studies/7":
            return 200, make_study()
        return 200, {"data": [make_trial(4, value_folds=5), pruned], "count": 2}

    stub.handle = handle
    result = runner.invoke(cli.app, ["trials", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ 5 "))
    assert "pruned" in row and "0.52 ± 0.0042 (3/5 folds)" in row
    assert f"pruned: {reason}" in result.stdout
    stub.handle = lambda request: (200, {"data": [make_trial(4, value_folds=5)], "count": 1})
    requests = len(stub.requests)
    result = runner.invoke(cli.app, ["trials", "7", "--url", stub.url])
    assert result.exit_code == 0 and "folds" not in result.stdout
    assert len(stub.requests) == requests + 1  # no pruned trial: the study is not read


CSV = b'"number","status","value"\r\n0,"completed",0.25\r\n1,"failed",""\r\n'


def test_trials_csv_goes_to_stdout_with_the_filters(stub):
    stub.handle = lambda request: (200, CSV)
    args = ["trials", "7", "--csv", "--sort", "-value", "--status", "failed"]
    result = runner.invoke(cli.app, [*args, "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == CSV
    request = stub.requests[0]
    assert request.path == "/studies/7/trials.csv"
    assert request.query == {"sort": "-value", "status": "failed"}


def test_trials_csv_output_file_is_written_whole_or_left_alone(stub, tmp_path):
    stub.handle = lambda request: (200, CSV)
    path = tmp_path / "trials.csv"
    result = runner.invoke(cli.app, ["trials", "7", "--csv", "-o", str(path), "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == CSV and f"wrote the trials of study 7 to {path}" in result.stdout
    assert path.stat().st_mode & 0o644 == 0o644  # readable as any new file, not 0600
    stub.handle = lambda request: (404, {"detail": "study 8 not found"})
    result = runner.invoke(cli.app, ["trials", "8", "--csv", "-o", str(path), "--url", stub.url])
    assert_one_line_error(result, "study 8 not found")
    assert path.read_bytes() == CSV and [p.name for p in tmp_path.iterdir()] == ["trials.csv"]
    missing = tmp_path / "no" / "such" / "dir.csv"
    result = runner.invoke(
        cli.app, ["trials", "7", "--csv", "-o", str(missing), "--url", stub.url]
    )
    assert_one_line_error(result, f"cannot write {missing}")


def test_trials_output_without_csv_is_a_usage_error(stub, tmp_path):
    result = runner.invoke(
        cli.app, ["trials", "7", "-o", str(tmp_path / "x.csv"), "--url", stub.url]
    )
    assert result.exit_code == 2 and "--csv" in result.output
    assert not stub.requests


def test_best_without_a_completed_trial_fails(stub, make_study):
    stub.handle = lambda request: (200, make_study(finished=0))
    result = runner.invoke(cli.app, ["best", "7", "--url", stub.url])
    assert_one_line_error(result, "study 7 has no completed trial yet")
    stub.handle = lambda request: (200, make_study(status="completed", finished=0))
    result = runner.invoke(cli.app, ["best", "7", "--url", stub.url])
    assert_one_line_error(result, "study 7 has no completed trial")
    assert result.stderr.strip().endswith("trial")  # not "yet": none is to come


def test_trials_marks_a_trial_that_breaks_the_constraints(stub, make_trial):
    trials = [make_trial(4, feasible=True), make_trial(1, 0.05, feasible=False)]
    stub.handle = lambda request: (200, {"data": trials, "count": 2})
    result = runner.invoke(cli.app, ["trials", "7", "--sort", "best", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert result.stdout.count("infeasible") == 1
    row = result.stdout.splitlines().index(
        next(line for line in result.stdout.splitlines() if line.startswith("│ 1 "))
    )
    assert "infeasible" in result.stdout.splitlines()[row + 1]


def test_best_prints_value_and_params(stub, make_study):
    stub.handle = best_answers(make_study())
    result = runner.invoke(cli.app, ["best", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert "best trial #2 of study 7 digits-mlp: 0.1235 ± 0.0042" in result.stdout
    assert "depth" in result.stdout and "relu" in result.stdout
    assert "on new data" not in result.stdout  # no estimate given: none said


def test_best_says_what_to_expect_of_the_winner_on_new_data(stub, make_study):
    selection = {"number": 2, "value": 0.1235, "corrected": 0.1461, "bias": 0.0226, "trials": 30}
    stub.handle = best_answers(make_study(), selection)
    result = runner.invoke(cli.app, ["best", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert "expect 0.1461 on new data (0.023 worse, for being the best of 30 trials" in " ".join(
        result.stdout.split()
    )
    assert ("GET", "/studies/7/insights/folds") in [(r.method, r.path) for r in stub.requests]


@pytest.mark.parametrize(("final", "code"), [("completed", 0), ("stopped", 0), ("failed", 1)])
def test_watch_follows_to_the_end_and_exits_by_outcome(stub, make_study, final, code):
    states = iter(["running", "running", final])
    stub.handle = lambda request: (200, make_study(status=next(states, final), finished=4))
    result = runner.invoke(cli.app, ["watch", "7", "--interval", "0.1", "--url", stub.url])
    assert result.exit_code == code, result.output
    assert f"study 7 {final}: 4/10 finished" in result.stdout
    assert "best trial #2" in result.stdout


def test_stop(stub, make_study):
    stub.handle = lambda request: (200, make_study(status="stopped"))
    result = runner.invoke(cli.app, ["stop", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert [(r.method, r.path) for r in stub.requests][-1] == ("POST", "/studies/7/stop")
    assert "study 7 (digits-mlp) is stopped" in result.stdout


def test_stop_waits_until_the_scheduler_has_stopped_it(stub, make_study):
    answers = iter([make_study(status="running", stop_requested=True)] * 2)
    stub.handle = lambda request: (
        (202 if request.method == "POST" else 200, next(answers, make_study(status="stopped")))
    )
    result = runner.invoke(cli.app, ["stop", "7", "--url", stub.url])
    assert result.exit_code == 0, result.output
    assert "study 7 (digits-mlp) is stopped" in result.stdout
    stub.handle = lambda request: (202, make_study(status="running", stop_requested=True))
    result = runner.invoke(cli.app, ["stop", "7", "--no-wait", "--url", stub.url])
    assert "study 7 (digits-mlp) is stopping" in result.stdout


def test_the_token_goes_with_every_request(stub, make_study, monkeypatch):
    stub.handle = lambda request: (200, make_study())
    runner.invoke(cli.app, ["--token", "fw_given", "status", "7", "--url", stub.url])
    assert stub.requests[-1].headers["authorization"] == "Bearer fw_given"
    monkeypatch.setenv("FOLDWISE_TOKEN", "fw_from_env")
    runner.invoke(cli.app, ["status", "7", "--url", stub.url])
    assert stub.requests[-1].headers["authorization"] == "Bearer fw_from_env"


def test_a_missing_token_is_one_line_that_says_what_to_do(stub):
    stub.handle = lambda request: (401, {"detail": "this needs a token"})
    result = runner.invoke(cli.app, ["studies", "--url", stub.url])
    assert_one_line_error(result, "this needs a token", "FOLDWISE_TOKEN", "foldwise token create")


def test_token_create_list_revoke_and_save(tmp_path, stub, make_study, monkeypatch):
    pytest.importorskip("foldwise.service.db.schema")
    url = f"sqlite:///{tmp_path / 'tokens.db'}"
    assert runner.invoke(cli.app, ["db", "upgrade", "--database-url", url]).exit_code == 0
    created = runner.invoke(
        cli.app,
        [
            "--url",
            stub.url,
            "token",
            "create",
            "ci",
            "--role",
            "viewer",
            "--save",
            "--database-url",
            url,
        ],
    )
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip().splitlines()[-1]
    assert secret.startswith("fw_") and len(secret) > 40
    saved = Path(os.environ["FOLDWISE_CREDENTIALS"])
    assert json.loads(saved.read_text()) == {stub.url: secret}
    assert saved.stat().st_mode & 0o777 == 0o600
    stub.handle = lambda request: (200, make_study())
    runner.invoke(cli.app, ["status", "7", "--url", stub.url])  # the saved token is used
    assert stub.requests[-1].headers["authorization"] == f"Bearer {secret}"
    again = runner.invoke(cli.app, ["token", "create", "ci", "--database-url", url])
    assert_one_line_error(again, "a token named 'ci' exists", "--replace")
    listed = runner.invoke(cli.app, ["token", "list", "--database-url", url])
    assert "ci" in listed.stdout and "viewer" in listed.stdout and secret not in listed.stdout
    revoked = runner.invoke(cli.app, ["token", "revoke", "ci", "--database-url", url])
    assert revoked.exit_code == 0 and "revoked 1 token named ci" in revoked.stdout
    assert "no tokens" in runner.invoke(cli.app, ["token", "list", "--database-url", url]).stdout
    missing = runner.invoke(cli.app, ["token", "revoke", "ci", "--database-url", url])
    assert_one_line_error(missing, "no active token named 'ci'")


def test_a_token_that_cannot_be_saved_is_still_printed(tmp_path, stub, monkeypatch):
    # the token row was created, then writing the credentials file raised a traceback before
    # the secret was printed: a token nobody could use, whose name blocked a second try
    pytest.importorskip("foldwise.service.db.schema")
    url = f"sqlite:///{tmp_path / 'tokens.db'}"
    assert runner.invoke(cli.app, ["db", "upgrade", "--database-url", url]).exit_code == 0
    unwritable = tmp_path / "credentials-dir"
    unwritable.mkdir()
    monkeypatch.setenv("FOLDWISE_CREDENTIALS", str(unwritable))
    args = ["--url", stub.url, "token", "create", "ci", "--save", "--database-url", url]
    result = runner.invoke(cli.app, args)
    assert_one_line_error(result, "the token above was created but not saved", str(unwritable))
    secret = result.stdout.strip().splitlines()[-1]
    assert secret.startswith("fw_") and len(secret) > 40


@pytest.mark.parametrize("command", [["list"], ["revoke", "ci"], ["create", "ci"]])
def test_token_commands_on_a_database_without_tables_are_one_line(tmp_path, command):
    pytest.importorskip("foldwise.service.db.schema")
    url = f"sqlite:///{tmp_path / 'never-upgraded.db'}"
    result = runner.invoke(cli.app, ["token", *command, "--database-url", url])
    assert_one_line_error(result, "OperationalError", "no such table")


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("fw_abc\u00a0", "the character '\\xa0' (U+00A0) at position 7"),
        ("fw_abc ", "a space at position 7"),
        ("fw_é", "the character 'é' (U+00E9) at position 4"),
    ],
)
def test_a_token_no_service_made_is_one_line_about_the_token(stub, monkeypatch, token, why):
    # httpx raised UnicodeEncodeError for a non-ASCII character (a traceback), and a space
    # read as "cannot reach the foldwise service ... Illegal header value"
    result = runner.invoke(cli.app, ["--token", token, "studies", "--url", stub.url])
    assert_one_line_error(result, f"the token holds {why}")
    monkeypatch.setenv("FOLDWISE_TOKEN", token)
    assert_one_line_error(runner.invoke(cli.app, ["studies", "--url", stub.url]), why)
    assert not stub.requests


@pytest.mark.parametrize("interval", ["inf", "nan", "1e10", "0"])
def test_a_poll_interval_that_is_not_a_wait_is_refused_before_anything_is_sent(
    tmp_path, spec_dict, stub, interval
):
    # time.sleep raised OverflowError (a traceback) after submit had created the study
    spec = write_spec(tmp_path, spec_dict)
    for args in (["watch", "7"], ["submit", spec, "--watch"]):
        result = runner.invoke(cli.app, [*args, "--interval", interval, "--url", stub.url])
        assert result.exit_code == 2 and "Traceback" not in result.output
        assert "--interval" in result.output
    assert not stub.requests
