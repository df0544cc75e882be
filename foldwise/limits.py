"""The documented limits of a study spec: what the service accepts and can run.

They keep every accepted study runnable (no overflow in a bound, a seed or a duration), keep a
submitted document small enough to store, send to every worker and show in the dashboard, and
make a 422 the answer to anything beyond them. docs/api.md lists them for users.
"""

from __future__ import annotations

MAX_PARAMS = 100
"""Parameters in a search space."""
MAX_CHOICES = 256
"""Choices of a categorical parameter, and values in a condition's ``in`` list."""
MAX_NAME_LENGTH = 64
"""Characters in a parameter's name or an objective metric's name."""
MAX_TEXT_LENGTH = 200
"""Characters in a study's name, a task name or a categorical choice."""
MAX_ABS_BOUND = 1e15
"""Largest magnitude of a parameter bound (and of an int parameter's values: exact in floats)."""
MAX_SEED = 2**32 - 1
"""Seeds run from 0 to this (numpy's range)."""
MAX_MINUTES = 525_600.0
"""A study's ``budget.max_minutes``: one year."""
MAX_FOLD_TIMEOUT_S = 7 * 24 * 3600.0
"""A fold run's ``trainer.fold_timeout``: one week."""
MIN_FOLD_TIMEOUT_S = 5.0
"""The shortest ``trainer.fold_timeout``: a fold run's workers start and its first epoch
reports in less only on a warm, idle machine, so a shorter one would fail every trial."""
DEFAULT_FOLD_TIMEOUT_S = 3600.0
"""A fold run with no epoch left to report after an hour is treated as hung."""
DEFAULT_CHECK_TIMEOUT_S = 600.0
"""How long ``foldwise task check`` lets its fold train before it fails as hung."""
MAX_CPUS_PER_WORKER = 1024.0
MIN_CPUS_PER_WORKER = 0.01
MAX_GPUS_PER_WORKER = 64.0
MIN_GPU_FRACTION = 0.01
"""The smallest share of a GPU a worker may ask for (Ray keeps 4 decimals)."""
MAX_OPTIONS_BYTES = 65_536
"""Size of ``trainer.options`` or ``optimizer.options`` as JSON: they travel to every worker."""
MAX_DEPTH = 32
"""Nesting of any value in a spec (lists and mappings inside each other)."""
MAX_INT = 2**63 - 1
"""Largest magnitude of any integer in a spec (SQL's BIGINT), and the largest study id."""
MAX_WARM_START_STUDIES = 20
"""Earlier studies a spec's ``warm_start`` may name."""
MAX_WARM_START_OBSERVATIONS = 10_000
"""Finished trials of earlier studies a warm start keeps (the best half and the most recently
finished rest): what the GP conditions on at most is 1,000, and they are copied into the new
study."""
MAX_TASK_CODE_BYTES = 50 * 2**20
"""Size of a user task's top-level package (its files, without caches and dot-files): it is
copied at submit, kept for the study and sent to every node that runs one of its folds."""
MAX_TASK_CODE_FILES = 10_000
"""Files in a user task's top-level package, for the same reason."""

IDENTIFIER = r"^[A-Za-z_][A-Za-z0-9_]*$"
"""A parameter's name: an ASCII Python identifier (it becomes a keyword in user code)."""
_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
TASK_NAME = rf"^{_DOTTED}(:{_DOTTED})?$"
"""A built-in task's name, ``package.module`` or ``package.module:attr``."""
METRIC_NAME = r"^[A-Za-z_][A-Za-z0-9_.]*$"

TASK_DESCRIBE_TIMEOUT_S = 60.0
"""How long the service gives a task to load where its folds run, at submit (a user task is
imported in a Ray worker to learn its kind and metrics)."""
SUBMIT_TIMEOUT_S = TASK_DESCRIBE_TIMEOUT_S + 30.0
"""How long the SDK waits for a submit's answer, whatever its own timeout: the service may take
the task's describe time and its checks."""
