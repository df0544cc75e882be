"""User task modules for tests, importable as `tests.user_tasks.<name>` from the repo root."""
