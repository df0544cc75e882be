"""The code a study runs: its task's package as it was at submit, named by its content.

At submit the top-level package of a user's task is read from the service's disk (never
imported here), hashed by content and kept in the artifact store as ``code/<hash>.zip``: the
one storage every service instance shares. The study keeps the hash. Its fold runs unpack that
archive into a local ``CodeCache`` (a folder per hash) and give the folder to Ray as their
workers' ``py_modules``, so a study runs its task as submitted, whatever changed on disk since
and whichever instance schedules it. Built-in tasks are the service's own code: no snapshot.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import io
import os
import shutil
import stat
import sys
import sysconfig
import uuid
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from foldwise.limits import MAX_TASK_CODE_BYTES, MAX_TASK_CODE_FILES
from foldwise.service.artifact_store import ArtifactStore
from foldwise.trainers.task import BUILTIN_TASKS

OWN_PACKAGES = frozenset({"foldwise"})
"""Ours (the server's packages install inside it): installed on every node (the image), never
shipped. A user's own top-level ``service`` or ``trainers`` package is theirs, and ships."""
CODE_PREFIX = "code"
"""Where snapshots live in the artifact store: ``code/<hash>.zip``."""
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
"""Every archive member's time, so one snapshot always makes the same bytes."""


class TaskCodeError(Exception):
    """A task's package cannot be shipped (too large, unreadable, or a stored archive that is
    missing or does not match its hash)."""


@dataclass(frozen=True)
class CodeSnapshot:
    """A package's files, by path from the folder above it (so each starts with the package's
    name), sorted, and their content hash (sha256 hex)."""

    files: tuple[tuple[str, bytes], ...]
    hash: str

    @classmethod
    def of(cls, files: Iterable[tuple[str, bytes]]) -> CodeSnapshot:
        ordered = tuple(sorted(files))
        return cls(ordered, code_hash(ordered))

    @property
    def top(self) -> str:
        """The package's folder name, or a single module's file name."""
        return self.files[0][0].split("/")[0] if self.files else ""


def code_hash(files: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over each file's path and bytes, in path order, each length-prefixed so no two
    different sets of files give the same stream."""
    digest = hashlib.sha256()
    for path, data in sorted(files):
        name = path.encode()
        digest.update(len(name).to_bytes(8, "big") + name)
        digest.update(len(data).to_bytes(8, "big") + data)
    return digest.hexdigest()


def code_key(hash_: str) -> str:
    """The snapshot's key in the artifact store."""
    return f"{CODE_PREFIX}/{hash_}.zip"


def find_package(top: str, search: Sequence[str] = ()) -> Path | None:
    """The folder (a package) or file (a module) of the top-level name ``top``, found in
    ``search`` and then ``sys.path`` without importing it; None for ours, Python's own, a
    compiled extension or a namespace without files, and names found nowhere."""
    if top in OWN_PACKAGES:
        return None
    spec = importlib.machinery.PathFinder.find_spec(top, [*search, *sys.path])
    if spec is None:
        return None
    if spec.submodule_search_locations:
        location = list(spec.submodule_search_locations)[0]
    elif spec.origin and spec.origin.endswith(".py"):
        location = spec.origin
    else:
        return None
    if location.startswith(sysconfig.get_paths()["stdlib"]):
        return None
    return Path(location)


def task_top(task: str) -> str | None:
    """The top-level package of a user's task name; None for a built-in task."""
    if task in BUILTIN_TASKS:
        return None
    return task.partition(":")[0].split(".")[0]


def snapshot_task(task: str, search: Sequence[str] = ()) -> CodeSnapshot | None:
    """The task's top-level package as it is on disk now; None for a built-in task, one of
    ours, or a package not on this machine (then the workers' own installation runs it)."""
    top = task_top(task)
    location = None if top is None else find_package(top, search)
    return None if location is None else snapshot_package(location)


def unsafe_name(path: str) -> str | None:
    """Why ``path`` (a snapshot member, from the package's parent folder) may not be shipped,
    or None: the one rule of submit and unpack alike. A name must be UTF-8, relative, free of
    ``..``, empty parts, backslashes and control characters (a newline, say)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return "is not UTF-8"
    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        return "holds a control character"
    if "\\" in path:
        return "holds a backslash"
    parts = path.split("/")
    if path.startswith("/") or any(part in ("", ".", "..") for part in parts):
        return "is not a plain relative path"
    return None


def snapshot_package(
    location: Path,
    *,
    max_bytes: int = MAX_TASK_CODE_BYTES,
    max_files: int = MAX_TASK_CODE_FILES,
    skip: Callable[[str, str], None] | None = None,
) -> CodeSnapshot:
    """Every file of a package folder (or the one file of a module), without ``__pycache__``,
    compiled ``.pyc`` files, or dot-files and dot-folders. Nothing outside the package enters
    it: a symlink, like a name that ``unsafe_name`` refuses, is a ``TaskCodeError`` naming
    it, or with ``skip`` is left out and told to it (the path, and why). ``TaskCodeError``
    past the limits."""
    paths = [location] if location.is_file() else _package_files(location, skip)
    files: list[tuple[str, bytes]] = []
    total = 0
    for count, path in enumerate(paths, 1):
        if count > max_files:
            raise TaskCodeError(
                f"task package {location.name!r} has more than {max_files:,} files "
                "(this service ships at most that many per study)"
            )
        try:
            data = path.read_bytes() if path.stat().st_size <= max_bytes - total else None
        except OSError as exc:
            raise TaskCodeError(f"task package file {path.name!r} cannot be read: {exc}") from exc
        if data is None or total + len(data) > max_bytes:
            raise TaskCodeError(
                f"task package {location.name!r} is larger than {max_bytes / 2**20:g} MiB "
                "(this service ships at most that much code per study: keep data out of it)"
            )
        total += len(data)
        files.append((path.relative_to(location.parent).as_posix(), data))
    if not files:
        raise TaskCodeError(f"task package {location.name!r} has no source files to ship")
    return CodeSnapshot.of(files)


def _package_files(
    location: Path, skip: Callable[[str, str], None] | None = None
) -> Iterator[Path]:
    """The files of a package folder that are shipped, lazily (a huge folder is refused
    before it has all been listed); a symlink or an unsafe name is refused, or skipped."""
    for folder, dirs, names in os.walk(location):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if _shipped(d) and d != "__pycache__")
        for entry in [*dirs]:
            if _refused(here / entry, location, skip):
                dirs.remove(entry)
        for name in sorted(names):
            path = here / name
            if not _shipped(name) or name.endswith((".pyc", ".pyo")):
                continue
            if not _refused(path, location, skip) and path.is_file():
                yield path


def _refused(path: Path, location: Path, skip: Callable[[str, str], None] | None) -> bool:
    """Whether ``path`` is left out: a symlink or an unsafe name, refused (``TaskCodeError``)
    unless ``skip`` is given, which is told."""
    member = os.fsdecode(path.relative_to(location.parent))
    why = "is a symlink" if path.is_symlink() else unsafe_name(member)
    if why is None:
        return False
    if skip is None:
        raise TaskCodeError(
            f"task package file {member!r} {why}: a package ships its own files only, under "
            "plain UTF-8 names (copy what it links to into it, or rename it)"
        )
    skip(member, why)
    return True


def _shipped(name: str) -> bool:
    return not name.startswith(".")


def zip_snapshot(snapshot: CodeSnapshot) -> bytes:
    """The snapshot as a zip archive; the same snapshot always gives the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in snapshot.files:
            info = zipfile.ZipInfo(path, _ZIP_TIME)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
    return buffer.getvalue()


def unzip_snapshot(data: bytes, expected: str) -> CodeSnapshot:
    """The snapshot in an archive, checked against its ``expected`` hash."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            files = [(info.filename, archive.read(info)) for info in archive.infolist()]
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise TaskCodeError(f"task code {expected[:12]} is not a readable archive") from exc
    for path, _data in files:
        if unsafe_name(path) is not None:
            raise TaskCodeError(f"task code {expected[:12]} holds an unsafe path {path!r}")
    snapshot = CodeSnapshot.of(files)
    if snapshot.hash != expected:
        raise TaskCodeError(f"task code {expected[:12]} does not match its hash")
    return snapshot


def keep_snapshot(store: ArtifactStore, snapshot: CodeSnapshot) -> None:
    """Put the snapshot in the artifact store, once: a key names its content."""
    key = code_key(snapshot.hash)
    if not store.exists(key):
        store.write(key, zip_snapshot(snapshot))


class CodeCache:
    """Snapshots unpacked on this machine, a folder per hash: what Ray's ``py_modules`` get.

    A folder appears whole (written aside, then renamed into place), and it is used only while
    its files are the snapshot's: each use checks them against the hash (a stat of every file,
    and their content again when a stat moved), so a folder that anything changed since it
    was unpacked (a study's own code, say) is unpacked afresh from the snapshot, never used.
    Several processes may share the cache.

        >>> cache = CodeCache(tmp)  # doctest: +SKIP
        >>> cache.unpack(snapshot_task("labtasks.mlp:task"))  # doctest: +SKIP
        PosixPath('.../a1b2.../labtasks')
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory).resolve()

    def module_path(self, hash_: str) -> Path | None:
        """The unpacked package (or module file) of snapshot ``hash_``, if it is here as the
        snapshot was."""
        folder = self.directory / hash_
        entries = list(folder.iterdir()) if folder.is_dir() else []
        if len(entries) != 1 or not package_matches(entries[0], hash_):
            return None
        return entries[0]

    def snapshot(self, hash_: str) -> CodeSnapshot | None:
        """Snapshot ``hash_`` as this cache holds it (checked), or None."""
        found = self.module_path(hash_)
        return None if found is None else unpacked_snapshot(found)

    def unpack(self, snapshot: CodeSnapshot) -> Path:
        """The snapshot's package in the cache, written there if it is not yet (or not as
        the snapshot was)."""
        found = self.module_path(snapshot.hash)
        if found is not None:
            return found
        self.directory.mkdir(parents=True, exist_ok=True)
        self._discard(snapshot.hash)
        partial = self.directory / f".partial-{uuid.uuid4().hex}"
        try:
            write_files(partial, snapshot)
            try:
                partial.rename(self.directory / snapshot.hash)
            except OSError:  # another process put it there first
                if self.module_path(snapshot.hash) is None:
                    raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return self.directory / snapshot.hash / snapshot.top

    def fetch(self, store: ArtifactStore, hash_: str) -> Path:
        """Snapshot ``hash_`` unpacked here, read from the artifact store when it is not yet
        or not as it was (a restarted service, another instance, a changed folder)."""
        found = self.module_path(hash_)
        if found is not None:
            return found
        data = store.read(code_key(hash_))
        if data is None:
            raise TaskCodeError(
                f"task code {hash_[:12]} is not in the artifact store ({store.location})"
            )
        return self.unpack(unzip_snapshot(data, hash_))

    def _discard(self, hash_: str) -> None:
        """Take a folder that is not the snapshot's out of the cache (renamed aside at once,
        then removed)."""
        folder = self.directory / hash_
        if not folder.exists():
            return
        stale = self.directory / f".stale-{uuid.uuid4().hex}"
        try:
            folder.rename(stale)
        except OSError:
            return  # another process moved it first
        shutil.rmtree(stale, ignore_errors=True)


def write_files(root: Path, snapshot: CodeSnapshot) -> None:
    """The snapshot's files under ``root`` (each path from the package's parent folder)."""
    for path, data in snapshot.files:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def unpacked_snapshot(location: Path) -> CodeSnapshot:
    """The snapshot an unpacked package (a code cache's ``module_path``) holds."""
    files = _unpacked_files(location)
    if not files:
        raise TaskCodeError(f"task code at {location} is not an unpacked snapshot")
    return CodeSnapshot.of(files)


_MATCHED: dict[tuple[str, str], tuple[tuple[str, int, int, int, int], ...]] = {}
"""Each unpacked package's stat signature when its files last matched a snapshot's hash."""


def package_matches(location: Path, hash_: str) -> bool:
    """Whether the unpacked package at ``location`` (its folder, or a module's file) holds
    exactly the files of snapshot ``hash_``: nothing added, changed or linked. Its files are
    read and hashed again only when a stat of them moved since they last matched."""
    key = (str(location), hash_)
    signature = _signature(location)
    if signature is not None and _MATCHED.get(key) == signature:
        return True
    files = _unpacked_files(location)
    if files is None or code_hash(files) != hash_:
        _MATCHED.pop(key, None)
        return False
    if signature is not None:
        _MATCHED[key] = signature
    return True


def _unpacked_files(location: Path) -> list[tuple[str, bytes]] | None:
    """The files of an unpacked package by their paths from its parent folder, or None when
    it holds something that is not a plain file or folder."""
    if location.is_symlink():
        return None
    if location.is_file():
        return [(location.name, location.read_bytes())]
    return _folder_files(location)


def _folder_files(folder: Path) -> list[tuple[str, bytes]] | None:
    """Every file under ``folder`` by its path from the folder above it, or None when
    something there is not a plain file or folder (a symlink) or has an unsafe name."""
    files = []
    for here, dirs, names in os.walk(folder):
        for name in [*dirs, *names]:
            path = Path(here, name)
            if path.is_symlink() or not (path.is_dir() or path.is_file()):
                return None
        for name in names:
            path = Path(here, name)
            member = path.relative_to(folder.parent).as_posix()
            if unsafe_name(member) is not None:
                return None
            try:
                files.append((member, path.read_bytes()))
            except OSError:
                return None
    return files


def _signature(location: Path) -> tuple[tuple[str, int, int, int, int], ...] | None:
    """``location`` and every entry under it with what any change to it moves: its inode,
    size, modification and status-change times (a process can set the first three back, never
    the status change)."""
    paths = [str(location)]
    try:
        for here, dirs, names in os.walk(location):
            paths.extend(os.path.join(here, n) for n in [*dirs, *names])
        stats = [(path, os.lstat(path)) for path in sorted(paths)]
    except OSError:
        return None
    return tuple((p, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for p, s in stats)
