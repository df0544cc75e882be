"""Built-in tasks, referenced by name in a study spec (see `trainers.task.BUILTIN_TASKS`)."""
