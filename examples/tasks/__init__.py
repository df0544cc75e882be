"""Example user tasks (docs/tasks.md): reference them as "examples.tasks.<module>[:attr]"."""
