"""The rules that decide how much of a trial to train (docs/racing.md): racing across its
folds (:mod:`.racing`; by dominance for several objectives, :mod:`.dominance`), pruning inside
a fold by its learning curve (:mod:`.in_fold`), and a trial's statistics from its folds
(:mod:`.fold_statistics`). Pure functions of stored results, so a restarted service reaches
the same decisions. They depend only on ``foldwise`` (the spec), numpy and scipy, as the
optimizers do, so the service's scheduler and the Ray Tune bridge can both use them."""
