"""A study's task code: its package copied at submit, named by content, kept in the artifact
store and unpacked for Ray; the submit check describes that copy, not the disk."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from foldwise.limits import MAX_TASK_CODE_BYTES
from foldwise.service.admission.task_policy import describe_in_subprocess
from foldwise.service.artifact_store import ArtifactStore, artifact_store
from foldwise.service.executor import FoldFailed, RayExecutor
from foldwise.service.task_code import (
    CodeCache,
    CodeSnapshot,
    TaskCodeError,
    code_key,
    keep_snapshot,
    package_matches,
    snapshot_package,
    snapshot_task,
    unsafe_name,
    unzip_snapshot,
    zip_snapshot,
)
from tests.service.conftest import signed_in_client
from tests.service.study_specs import study_spec
from tests.trainers.fold_jobs import make_job

TASK = """kind = "{kind}"


def load_data():
    return [[0.0], [1.0]], [0, 1]


def build_model(params):
    raise ValueError("not trained here")
"""


def _package(root: Path, name: str = "labpkg", kind: str = "classification") -> Path:
    """A task package with a subpackage, data, and the files a snapshot leaves out."""
    package = root / name
    (package / "sub" / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "task.py").write_text(TASK.format(kind=kind))
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "table.csv").write_bytes(b"a,b\n1,2\n")
    (package / "sub" / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\0compiled")
    (package / "stale.pyc").write_bytes(b"\0compiled")
    (package / ".env").write_text("SECRET=1\n")
    (package / ".git").mkdir()
    (package / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return package


def test_a_snapshot_holds_the_packages_files_and_leaves_caches_and_dot_files(
    tmp_path: Path,
) -> None:
    package = _package(tmp_path)
    snapshot = snapshot_package(package)
    assert [path for path, _data in snapshot.files] == [
        "labpkg/__init__.py",
        "labpkg/sub/__init__.py",
        "labpkg/sub/table.csv",
        "labpkg/task.py",
    ]
    assert snapshot.top == "labpkg" and len(snapshot.hash) == 64


@pytest.mark.parametrize("linked", ["file", "folder"])
def test_nothing_outside_the_package_enters_a_snapshot(tmp_path: Path, linked: str) -> None:
    """A symlink (to the API process's environment, the database file, another package) is
    refused naming it; the service's start, which ships the allowed packages, leaves it out."""
    package = _package(tmp_path)
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "db.sqlite").write_bytes(b"the database")
    if linked == "file":
        (package / "sub" / "environ").symlink_to(tmp_path / "secret" / "db.sqlite")
        name = "labpkg/sub/environ"
    else:
        (package / "data").symlink_to(tmp_path / "secret", target_is_directory=True)
        name = "labpkg/data"
    with pytest.raises(TaskCodeError, match=f"task package file '{name}' is a symlink"):
        snapshot_package(package)
    skipped: list[tuple[str, str]] = []
    kept = snapshot_package(package, skip=lambda path, why: skipped.append((path, why)))
    assert skipped == [(name, "is a symlink")]
    assert all(b"the database" not in data for _path, data in kept.files)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        (os.fsdecode(b"caf\xe9.py"), "is not UTF-8"),
        ("x\\..\\..\\evil.py", "holds a backslash"),
        ("two\nlines.py", "holds a control character"),
    ],
)
def test_a_name_submit_would_ship_is_one_unpack_takes(tmp_path: Path, name: str, why: str) -> None:
    package = _package(tmp_path)
    (package / name).write_text("")
    with pytest.raises(TaskCodeError, match="task package file 'labpkg/") as refused:
        snapshot_package(package)
    assert why in str(refused.value) and repr(f"labpkg/{name}") in str(refused.value)
    skipped: list[str] = []
    kept = snapshot_package(package, skip=lambda path, why: skipped.append(path))
    assert skipped == [f"labpkg/{name}"]
    assert unzip_snapshot(zip_snapshot(kept), kept.hash) == kept  # what is kept, unpacks
    assert unsafe_name(f"labpkg/{name}") == why  # and unpack judges it by the same rule
    for bad in ("../evil.py", "/etc/passwd", "labpkg//x.py", "labpkg/./x.py"):
        assert unsafe_name(bad) == "is not a plain relative path"


def _planted_bytecode(package: Path) -> None:
    (package / "__pycache__").mkdir()  # Python would load it in place of task.py
    (package / "__pycache__" / "task.cpython-311.pyc").write_bytes(b"\0compiled")


def test_a_cache_folder_changed_after_it_was_unpacked_is_unpacked_afresh(tmp_path: Path) -> None:
    """What a study's code (or anyone) appends to, adds to or links into the cache is never
    used: the folder is checked against its hash at each use and rebuilt from the snapshot."""
    snapshot = snapshot_package(_package(tmp_path / "src"))
    store = artifact_store(tmp_path / "artifacts")
    keep_snapshot(store, snapshot)
    cache = CodeCache(tmp_path / "cache")
    task = cache.unpack(snapshot) / "task.py"
    original = task.read_bytes()
    tampers = [
        lambda: task.write_bytes(original + b"\nraise SystemExit('poisoned')\n"),
        lambda: _planted_bytecode(task.parent),
        lambda: (task.parent / "extra.py").symlink_to(tmp_path / "elsewhere.py"),
    ]
    for tamper in tampers:
        tamper()
        assert cache.module_path(snapshot.hash) is None  # not as the snapshot was
        assert cache.fetch(store, snapshot.hash) == task.parent  # from the stored zip
        assert task.read_bytes() == original
        assert cache.snapshot(snapshot.hash) == snapshot
    size = os.stat(task).st_size  # the same size and times back: the status change tells
    stat = os.stat(task)
    task.write_bytes(original.replace(b"classification", b"regressionXYZ1"))
    os.utime(task, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert os.stat(task).st_size == size
    assert cache.unpack(snapshot) == task.parent and task.read_bytes() == original
    assert package_matches(task.parent, snapshot.hash)
    task.write_bytes(b"")
    assert not package_matches(task.parent, snapshot.hash)


def test_the_hash_is_of_content_only(tmp_path: Path) -> None:
    """The same files give the same hash wherever they are and whenever they were touched;
    any changed byte, renamed file or added file gives another."""
    first = snapshot_package(_package(tmp_path / "a"))
    again = _package(tmp_path / "b")
    os.utime(again / "task.py", (0, 0))
    (again / "sub" / "__pycache__" / "other.pyc").write_bytes(b"\1")
    assert snapshot_package(again).hash == first.hash
    (again / "task.py").write_text(TASK.format(kind="regression"))
    edited = snapshot_package(again).hash
    (again / "task.py").rename(again / "task2.py")
    renamed = snapshot_package(again).hash
    (again / "notes.txt").write_text("")
    added = snapshot_package(again).hash
    assert len({first.hash, edited, renamed, added}) == 4
    other_name = snapshot_package(_package(tmp_path / "c", name="otherpkg"))
    assert other_name.hash != first.hash  # the package's name is part of what it imports as


def test_a_single_module_is_a_snapshot_of_one_file(tmp_path: Path) -> None:
    (tmp_path / "single_task.py").write_text(TASK.format(kind="regression"))
    snapshot = snapshot_task("single_task:task", [str(tmp_path)])
    assert snapshot is not None and [p for p, _ in snapshot.files] == ["single_task.py"]


def test_built_in_tasks_ours_and_unknown_packages_have_no_snapshot(tmp_path: Path) -> None:
    assert snapshot_task("digits_mlp", [str(tmp_path)]) is None
    assert snapshot_task("foldwise.trainers.builtin.digits_mlp", [str(tmp_path)]) is None
    assert snapshot_task("json.decoder:x", [str(tmp_path)]) is None
    assert snapshot_task("no_such_package.task", [str(tmp_path)]) is None


def test_a_package_past_the_limits_is_refused(tmp_path: Path) -> None:
    package = _package(tmp_path)
    with pytest.raises(TaskCodeError, match="more than 3 files"):
        snapshot_package(package, max_files=3)
    with pytest.raises(TaskCodeError, match="larger than"):
        snapshot_package(package, max_bytes=10)
    with (package / "weights.bin").open("wb") as sparse:  # its size is known before reading it
        sparse.truncate(MAX_TASK_CODE_BYTES + 1)
    with pytest.raises(TaskCodeError, match="larger than 50 MiB"):
        snapshot_package(package)


def test_the_archive_is_the_same_bytes_every_time_and_checked_on_the_way_back(
    tmp_path: Path,
) -> None:
    snapshot = snapshot_package(_package(tmp_path))
    data = zip_snapshot(snapshot)
    assert zip_snapshot(snapshot_package(tmp_path / "labpkg")) == data
    assert unzip_snapshot(data, snapshot.hash) == snapshot
    with pytest.raises(TaskCodeError, match="does not match"):
        unzip_snapshot(data, "0" * 64)
    with pytest.raises(TaskCodeError, match="not a readable archive"):
        unzip_snapshot(b"PK not a zip", snapshot.hash)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as archive:
        archive.writestr("../outside.py", "x = 1\n")
    files = [("../outside.py", b"x = 1\n")]
    with pytest.raises(TaskCodeError, match="unsafe path"):
        unzip_snapshot(evil.read_bytes(), CodeSnapshot.of(files).hash)


def test_a_new_instance_unpacks_the_snapshot_from_the_store(tmp_path: Path, monkeypatch) -> None:
    """What a restarted service, or the instance that takes the lease over, does: the code
    comes from the artifact store, not from the disk it was submitted from."""
    snapshot = snapshot_package(_package(tmp_path / "src"))
    store = ArtifactStore(tmp_path / "artifacts")
    keep_snapshot(store, snapshot)
    written = store.path(code_key(snapshot.hash))
    monkeypatch.setattr(store, "write", lambda *_: pytest.fail("a kept snapshot is kept once"))
    keep_snapshot(store, snapshot)
    first = CodeCache(tmp_path / "cache-a").unpack(snapshot)
    assert first == tmp_path / "cache-a" / snapshot.hash / "labpkg"
    fetched = CodeCache(tmp_path / "cache-b").fetch(store, snapshot.hash)
    assert snapshot_package(fetched).hash == snapshot.hash
    assert CodeCache(tmp_path / "cache-b").fetch(store, snapshot.hash) == fetched
    assert [p.name for p in (tmp_path / "cache-b").iterdir()] == [snapshot.hash]
    Path(written).unlink()
    with pytest.raises(TaskCodeError, match="not in the artifact store"):
        CodeCache(tmp_path / "cache-c").fetch(store, snapshot.hash)


def test_a_fold_whose_code_is_not_in_the_store_fails_for_good(tmp_path: Path) -> None:
    """Before any worker is asked for: no Ray is needed to find out."""
    job = dataclasses.replace(make_job("labpkg.task"), code_hash="0" * 64)
    executor = RayExecutor(
        artifacts=ArtifactStore(tmp_path / "artifacts"), code_cache=CodeCache(tmp_path / "cache")
    )
    for ex, why in [(executor, "not in the artifact store"), (RayExecutor(), "no artifact store")]:
        with pytest.raises(FoldFailed, match=why) as failed:
            asyncio.run(anext(ex.run_fold(job, cpus_per_worker=1, gpus_per_worker=0)))
        assert not failed.value.retryable


def test_the_subprocess_describes_the_snapshot_not_the_disk(tmp_path: Path, monkeypatch) -> None:
    """The package sits in the working directory, which Python would put first: the copy
    taken at submit is what is loaded."""
    monkeypatch.chdir(tmp_path)
    package = _package(tmp_path)
    code = CodeCache(tmp_path / "cache").unpack(snapshot_package(package))
    (package / "task.py").write_text(TASK.format(kind="regression"))
    assert describe_in_subprocess("labpkg.task", code=code).kind == "classification"
    assert describe_in_subprocess("labpkg.task").kind == "regression"
    assert not list(code.rglob("__pycache__"))  # the cached copy stays as it was unpacked


def _labpkg_settings(tmp_path: Path) -> dict[str, Any]:
    """A service that runs ``labpkg``'s tasks, with its artifacts and code cache here."""
    return {
        "task_modules": ["labpkg"],
        "artifact_dir": tmp_path / "artifacts",
        "code_cache_dir": tmp_path / "cache",
    }


def _labpkg_spec() -> dict[str, Any]:
    spec = study_spec(trainer={"task": "labpkg.task", "epochs": 1, "batch_size": 32})
    spec["objective"] = {"metric": "val_accuracy", "direction": "maximize"}
    return spec


def test_a_submitted_study_keeps_its_codes_hash_and_its_code(
    database_url: str, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    package = _package(tmp_path)
    spec = _labpkg_spec()
    with signed_in_client(database_url, **_labpkg_settings(tmp_path)) as api:
        first = api.post("/studies", json=spec).json()
        again = api.post("/studies", json=spec).json()
        (package / "task.py").write_text(TASK.format(kind="regression"))
        refused = api.post("/studies", json=spec)  # the new code reports val_mse
        spec["objective"]["metric"] = "val_mse"
        edited = api.post("/studies", json=spec).json()
        builtin = api.post("/studies", json=study_spec()).json()
        shown = api.get(f"/studies/{first['id']}").json()
        with (package / "weights.bin").open("wb") as sparse:
            sparse.truncate(MAX_TASK_CODE_BYTES + 1)
        too_big = api.post("/studies", json=spec)
    assert refused.status_code == 422 and "(regression) reports" in refused.text
    assert first["code_hash"] == again["code_hash"] == shown["code_hash"]
    assert edited["code_hash"] not in (None, first["code_hash"])
    assert builtin["code_hash"] is None
    store = artifact_store(str(tmp_path / "artifacts"))
    kept = store.read(code_key(first["code_hash"]))
    assert kept is not None
    kept_files = dict(unzip_snapshot(kept, first["code_hash"]).files)
    assert b'kind = "classification"' in kept_files["labpkg/task.py"]
    assert too_big.status_code == 422
    [error] = too_big.json()["detail"]
    assert error["loc"] == ["body", "trainer", "task"] and "50 MiB" in error["msg"]


@pytest.mark.parametrize(
    ("planted", "named"),
    [
        (lambda p: (p / os.fsdecode(b"r\xe9sum\xe9.py")).write_text(""), "'labpkg/r\\udce9sum"),
        (lambda p: (p / "x\\..\\..\\evil.py").write_text(""), "'labpkg/x\\\\..\\\\..\\\\evil"),
        (lambda p: (p / "environ").symlink_to("/proc/self/environ"), "'labpkg/environ' is a sym"),
    ],
    ids=["not-utf8", "backslashes", "symlink"],
)
def test_a_package_a_snapshot_cannot_take_is_a_422_naming_the_file_and_stores_nothing(
    database_url: str, tmp_path: Path, monkeypatch, planted, named: str
) -> None:
    monkeypatch.chdir(tmp_path)
    planted(_package(tmp_path))
    spec = _labpkg_spec()
    with signed_in_client(database_url, **_labpkg_settings(tmp_path)) as api:
        response = api.post("/studies", json=spec)
        assert response.status_code == 422, response.text
        [error] = response.json()["detail"]
        assert error["loc"] == ["body", "trainer", "task"] and named in error["msg"]
        assert api.get("/studies").json()["count"] == 0
    assert not (tmp_path / "artifacts").exists() or not list(
        (tmp_path / "artifacts").rglob("*.zip")
    )
