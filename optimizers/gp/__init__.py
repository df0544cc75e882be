"""Bayesian optimisation with a Gaussian process (``gp``): the method, module by module.

- The model (:mod:`.model`): an exact GP on the encoded space (unit numeric columns, one-hot
  categories sharing one length-scale, inactive parameters at a fixed centre), constant ×
  Matérn 5/2 with one length-scale per parameter and a learned white-noise floor. Each trial's
  fold standard error enters as its own extra noise, so trials whose folds disagree pull the
  model less. Hyperparameters are MAP estimates under a length-scale prior (BoTorch's
  dimension-scaled one, or Optuna GPSampler's), refitted at every suggestion on a bounded
  subset of the results (:mod:`.fit`: the best half and the most recent rest), so a
  suggestion's cost stops growing with the study.
- The targets: losses warped (:mod:`.output_warp`, Yeo-Johnson) and standardised; a failed
  trial is told as the worst successful loss plus a tenth of their spread (:func:`.fit.
  penalize_failures`), so the search leaves its region while the scale of real results is
  kept. With one objective over a space with a numeric parameter the GP's prior mean is the
  worst loss told, so an unexplored region promises improvement only through its variance
  (elsewhere it is the losses' mean).
- The acquisition (:mod:`.log_ei`, :mod:`.acquisition`): log expected improvement below the
  best *predicted* loss (a lucky noisy mean is no target), its margin annealed to 0 over the
  budget, scored on random candidates and perturbations of the best points, then polished by
  L-BFGS-B with its exact gradient. Pending trials and the batch's earlier members are told
  as the model's own prediction, floored at the incumbent (the Kriging believer), so a batch
  spreads out.
- Constraints (:mod:`.feasibility`): a GP each, the acquisition weighed by the probability that
  all hold. Several objectives: two get a GP each and the expected hypervolume improvement over
  the predicted front (:mod:`.front`, :mod:`.ehvi`); three or four are scalarised by ParEGO's
  random Chebyshev weights (:mod:`.scalarize`), with EHVI over the last quarter of a long
  study's budget.

The optimizer itself (its options, the initial Sobol or random design) is
:class:`.optimizer.GPOptimizer`. Why each default is what it is, and what it was measured
against, is in docs/optimizers.md ("The GP" and the benchmark sections it points to).
"""

from foldwise.optimizers.gp.optimizer import GPOptimizer

__all__ = ["GPOptimizer"]
