"""The optimizer benchmark's quality tables, as markdown, from stored runs.

Regret is the final best value minus the problem's optimum (for the digits MLP, minus the best
value any shown run found). Ranks and paired comparisons use only the seeds the compared
methods share, so each comparison is between runs of the same seeds; a method with fewer than
half the seeds of the best-covered one on a problem is left out of that problem's ranks.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy.stats import rankdata, wilcoxon

from benchmarks.optimizer_results import Run
from benchmarks.problems import Problem

Runs = dict[str, dict[str, dict[int, Run]]]  # runs[problem][method][seed]


def final_regrets(runs: Runs, problem: Problem, methods: list[str]) -> dict[str, dict[int, float]]:
    """regret[method][seed] of the best value found."""
    table = runs[problem.name]
    optimum = problem.optimum
    if optimum is None:
        optimum = min(min(r.values) for m in methods for r in table[m].values())
    return {
        m: {seed: max(min(r.values) - optimum, 0.0) for seed, r in table[m].items()}
        for m in methods
    }


def common_seeds(regrets: dict[str, dict[int, float]]) -> list[int]:
    shared = set.intersection(*(set(by_seed) for by_seed in regrets.values()))
    return sorted(shared)


def mean_se(values: Any) -> str:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return f"{values.mean():.4g}" if len(values) else "-"
    return f"{values.mean():.4g} ± {values.std(ddof=1) / math.sqrt(len(values)):.2g}"


def mean_se_median(values: Any) -> str:
    """``mean ± s.e. (median)``: final regrets are heavy-tailed (a seed either finds the best
    basin or stays in a poor one), so the mean alone hides how most runs ended."""
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return mean_se(values)
    return f"{mean_se(values)} ({np.median(values):.4g})"


def row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def print_quality(runs: Runs, chosen: list[Problem], methods: list[str], peers: tuple) -> None:
    """Regret, rank, the GP against the best peer, batch against sequential, and speed."""
    names = [p.name for p in chosen]
    regrets = {p.name: final_regrets(runs, p, methods) for p in chosen}
    head = row(["method", *names]) + "\n" + "|---" * (len(names) + 1) + "|"
    seeds = sorted({len(by_seed) for r in regrets.values() for by_seed in r.values()})
    print(f"\n### Mean final regret ± s.e. (median) (seeds per cell: {seeds})\n\n{head}")
    for m in methods:
        print(row([m, *(mean_se_median(list(regrets[n][m].values())) for n in names)]))
    print_ranks(regrets, names, [m for m in methods if "@" not in m])
    ours = [m for m in methods if m not in peers and "@" not in m]
    shown_peers = [m for m in methods if m in peers]
    if ours and shown_peers:
        print_against_best_peer(regrets, names, ours[0], shown_peers)
    print_batches(regrets, names, methods)
    print(f"\n### Seconds per suggestion (mean over runs)\n\n{head}")
    for m in methods:
        cells = []
        for n in names:
            seconds = [r.seconds for r in runs[n][m].values()]
            cells.append(f"{np.mean(seconds):.3g}" if seconds else "-")
        print(row([m, *cells]))


def print_ranks(regrets: dict, names: list[str], methods: list[str]) -> None:
    """Mean rank per problem over the seeds the ranked methods share, and over the suite.

    A method with fewer than half the seeds of the best-covered one on a problem (a slow peer
    run on a few seeds) is left out of that problem's ranks rather than cutting everyone's
    seeds; its suite mean is over the problems where it is ranked.
    """
    if not methods:
        return
    ranks: dict[str, list[float]] = {m: [] for m in methods}
    counts = []
    for n in names:
        most = max(len(regrets[n][m]) for m in methods)
        ranked = [m for m in methods if most and 2 * len(regrets[n][m]) >= most]
        shared = common_seeds({m: regrets[n][m] for m in ranked}) if ranked else []
        counts.append(str(len(shared)))
        per_seed = None
        if shared:
            table = np.array([[regrets[n][m][s] for s in shared] for m in ranked])
            per_seed = np.apply_along_axis(rankdata, 0, table).mean(1)
        for m in methods:
            ok = per_seed is not None and m in ranked
            ranks[m].append(float(per_seed[ranked.index(m)]) if ok else math.nan)
    print(f"\n### Mean rank (1 = best; seeds shared by the ranked: {', '.join(counts)})\n")
    print(row(["method", *names, "all"]) + "\n" + "|---" * (len(names) + 2) + "|")
    for m in methods:
        cells = ["-" if math.isnan(r) else f"{r:.2f}" for r in ranks[m]]
        known = [r for r in ranks[m] if not math.isnan(r)]
        print(row([m, *cells, f"{np.mean(known):.2f}" if known else "-"]))


def worse_by_rank(diff: np.ndarray) -> bool:
    """Whether the signed-rank test's statistic leans to ``diff > 0`` (ours worse): its side,
    not the mean's, which a few far-off seeds can flip against most of the pairs."""
    nonzero = diff[diff != 0]
    ranks = rankdata(np.abs(nonzero))
    return bool(ranks[nonzero > 0].sum() > ranks[nonzero < 0].sum())


def print_against_best_peer(regrets: dict, names: list[str], ours: str, peers: list[str]) -> None:
    """Paired over seeds: ours minus the peer with the lowest mean regret on each problem,
    among peers with at least half the seeds (as in the ranks); then ours' mean and median
    against that peer's spread over the same seeds (:func:`against_spread`)."""
    print(f"\n### {ours} against the best peer per problem (paired over seeds)\n")
    print(row(["problem", "best peer", f"{ours} − peer", "seeds better / worse", "Wilcoxon p"]))
    print("|---|---|---|---|---|")
    spreads = []
    for n in names:
        found = best_peer(regrets[n], ours, peers)
        if found is None:
            continue
        best, a, b = found
        diff = np.where(np.isinf(a) & np.isinf(b), 0.0, a - b)  # neither found a feasible point
        p = wilcoxon(a, b).pvalue if np.any(diff != 0) else 1.0
        verdict = f"{p:.3g}"
        if p < 0.05:
            verdict += " (worse)" if worse_by_rank(diff) else " (better)"
        tally = f"{int((diff < 0).sum())} / {int((diff > 0).sum())} of {len(a)}"
        print(row([n, best, mean_se(diff), tally, verdict]))
        spreads.append(row([n, best, *against_spread(a, b)]))
    if spreads:
        print(f"\n### {ours} against the best peer's spread (same seeds)\n")
        print(
            row(
                [
                    "problem",
                    "best peer",
                    "peer: mean ± s.d. (median) [quartiles]",
                    f"{ours}: mean (median)",
                    "within the peer's spread",
                ]
            )
        )
        print("|---|---|---|---|---|")
        print("\n".join(spreads))


def best_peer(
    regrets: dict[str, dict[int, float]], ours: str, peers: list[str]
) -> tuple[str, np.ndarray, np.ndarray] | None:
    """The peer with the lowest mean regret among those with at least half the seeds, and
    ours' and its regrets over the seeds both have (None: no such peer, or one seed)."""
    most = max(len(regrets[m]) for m in [ours, *peers])
    covered = [m for m in peers if 2 * len(regrets[m]) >= most > 0]
    if not covered:
        return None
    best = min(covered, key=lambda m: np.mean(list(regrets[m].values())))
    shared = common_seeds({ours: regrets[ours], best: regrets[best]})
    if len(shared) < 2:
        return None
    a = np.array([regrets[ours][s] for s in shared])
    return best, a, np.array([regrets[best][s] for s in shared])


def against_spread(ours: np.ndarray, peer: np.ndarray) -> list[str]:
    """Cells: the peer's mean ± s.d. (median) [quartiles], ours' mean (median), and which of
    ours' two is within the peer's seed-to-seed spread: the mean at most one standard
    deviation above the peer's mean, the median at most the peer's upper quartile. A
    heavy-tailed peer's mean can lie above its own upper quartile, so each statistic is held
    against the spread of its own kind."""
    with np.errstate(invalid="ignore"):  # a run with no feasible point has regret inf
        low, high = np.percentile(peer, [25, 75])
        deviation = float(np.std(peer, ddof=1)) if np.isfinite(peer).all() else math.inf
        mean, median, peer_mean = float(np.mean(ours)), float(np.median(ours)), np.mean(peer)
    holds = [
        name
        for name, ok in (("mean", mean <= peer_mean + deviation), ("median", median <= high))
        if ok
    ]
    return [
        f"{peer_mean:.4g} ± {deviation:.2g} ({np.median(peer):.4g}) [{low:.4g}–{high:.4g}]",
        f"{mean:.4g} ({median:.4g})",
        " and ".join(holds) or "neither",
    ]


def print_batches(regrets: dict, names: list[str], methods: list[str]) -> None:
    """Each ``method@k`` against the same method one at a time, after the same evaluations."""
    batched = [m for m in methods if "@" in m and m.split("@")[0] in methods]
    if not batched:
        return
    print("\n### Trials in flight against one at a time (mean final regret, same budget)\n")
    print(row(["method", "problem", "seeds", "one at a time", "in flight", "ratio (95% CI)"]))
    print("|---|---|---|---|---|---|")
    for m in batched:
        base = m.split("@")[0]
        for n in names:
            shared = common_seeds({m: regrets[n][m], base: regrets[n][base]})
            seq = np.array([regrets[n][base][s] for s in shared])
            par = np.array([regrets[n][m][s] for s in shared])
            cells = [m, n, str(len(shared)), f"{seq.mean():.4g}", f"{par.mean():.4g}"]
            print(row([*cells, ratio_interval(par, seq)]))


def ratio_interval(par: np.ndarray, seq: np.ndarray, draws: int = 4000) -> str:
    """Ratio of mean regrets with a paired bootstrap 95% interval over seeds.

    Final regrets are heavy-tailed (a seed either finds the best basin or stays in a poor one),
    so the interval is what says whether a ratio is a difference or the luck of the seeds."""
    if len(seq) == 0 or seq.mean() <= 0:
        return "-"
    picks = np.random.default_rng(0).integers(0, len(seq), size=(draws, len(seq)))
    sums = seq[picks].sum(1)
    ratios = par[picks].sum(1)[sums > 0] / sums[sums > 0]
    low, high = np.percentile(ratios, [2.5, 97.5])
    return f"{par.mean() / seq.mean():.2f} ({low:.2f}-{high:.2f})"
