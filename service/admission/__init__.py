"""What a study must pass at submit, before anything is stored: the spec against the service
(``spec_checks``), where its task's code may come from and what the task is (``task_policy``),
and whether the cluster can ever place its fold runs (``cluster_fit``)."""
