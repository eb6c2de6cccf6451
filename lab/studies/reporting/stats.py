"""Statistics over seeds: mean +- std, the paired t-test of ROADMAP supp. B.4, relative gains, verdicts, and the
few formats every section of the page shares (a summary, a p-value, a list of seeds, a Markdown table).

Everything takes plain lists of floats (one value per seed) or raw-results records, so the
report and the tests share one implementation. Std is the sample standard deviation (ddof=1),
as the ± of the papers' tables over 5 runs. scipy (a dev extra, not a dependency of ``lab``) is imported by
the functions that test, so that importing the studies needs none.
"""
from __future__ import annotations

import math
from typing import Any, Iterable, NamedTuple, Optional, Sequence

Records = Sequence[dict[str, Any]]  # a study's raw results: one dict per run (results/NAME.json)

SIGNIFICANCE = 0.05  # a claim "reproduces" when the paired test rejects equality at this level
# A claim of the papers (study 1's, and the trend claims of studies 2, 4 and 5) gets one of three verdicts.
HOLDS, CONTRADICTED, UNRESOLVED = "resolved as in the paper", "contradicted", "not resolved"


class Summary(NamedTuple):
    mean: float
    std: float  # sample std (ddof=1); nan for a single value
    n: int


def mean_std(values: Sequence[float]) -> Summary:
    """Mean, sample standard deviation and count of ``values`` (nan, nan, 0 when empty)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        return Summary(math.nan, math.nan, 0)
    mean = sum(xs) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else math.nan
    return Summary(mean, std, n)


def fmt(s: Summary, scale: float = 100.0, digits: int = 1) -> str:
    """'64.2 ± 0.5' (percent by default, as the papers print); '—' when there is nothing."""
    if s.n == 0:
        return "—"
    if s.n == 1 or math.isnan(s.std):
        return f"{scale * s.mean:.{digits}f}"
    return f"{scale * s.mean:.{digits}f} ± {scale * s.std:.{digits}f}"


class TTest(NamedTuple):
    t: float
    p: float
    n: int  # number of pairs


def paired_ttest(a: Sequence[float], b: Sequence[float]) -> TTest:
    """Two-sided paired Student t-test of a vs b (scipy.stats.ttest_rel), pairs in order (by seed).

    nan when there are fewer than 2 pairs or every difference is equal (no variance to test).
    """
    if len(a) != len(b):
        raise ValueError(f"paired samples must have one length, got {len(a)} and {len(b)}")
    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    if len(diffs) < 2 or max(diffs) == min(diffs):
        return TTest(math.nan, math.nan, len(diffs))
    from scipy.stats import ttest_rel

    res = ttest_rel([float(x) for x in a], [float(y) for y in b])
    return TTest(float(res.statistic), float(res.pvalue), len(diffs))


def relative_gain(new: float, base: float) -> float:
    """100 * (new - base) / base: ROADMAP Fig. 5's "relative increase" in percent (nan if base is 0)."""
    return 100.0 * (new - base) / base if base else math.nan


def relative_decrease(new: float, base: float) -> float:
    """100 * (base - new) / base: supp. Table 9's "relative decrease" of the decomposability gap."""
    return -relative_gain(new, base)


def paired(records: Iterable[dict[str, Any]], metric: str, a: dict[str, Any],
           b: dict[str, Any]) -> tuple[list[float], list[float]]:
    """Values of ``metric`` for the records matching ``a`` and those matching ``b``, paired by seed
    (seeds present on one side only are dropped). ``a``/``b``: {field: value}, e.g. {"method": "ROADMAP"}."""
    def side(match: dict[str, Any]) -> dict[int, float]:
        return {r["seed"]: float(r[metric]) for r in records if all(_get(r, k) == v for k, v in match.items())}

    records = list(records)
    left, right = side(a), side(b)
    seeds = sorted(set(left) & set(right))
    return [left[s] for s in seeds], [right[s] for s in seeds]


def _get(record: dict[str, Any], field: str) -> Any:
    """A record's field, or one of its varied params (``params.batch_size`` is ``batch_size``)."""
    return record[field] if field in record else record.get("params", {}).get(field)


def select(records: Iterable[dict[str, Any]], **match: Any) -> list[dict[str, Any]]:
    """The records whose fields (or params) equal ``match``."""
    return [r for r in records if all(_get(r, k) == v for k, v in match.items())]


def summarise(records: Iterable[dict[str, Any]], metric: str, **match: Any) -> Summary:
    """mean ± std over seeds of ``metric`` for the records matching ``match``."""
    return mean_std([float(r[metric]) for r in select(records, **match)])


def verdict(diffs: Sequence[float], test: Optional[TTest] = None) -> str:
    """How a directional claim (``diffs`` = claimed-better minus baseline, per seed) fared:
    "reproduces" (mean > 0, paired p < 0.05), "same direction, not significant", "does not
    reproduce" (mean <= 0), "reversed (significant)" (mean < 0, p < 0.05), "not measured"."""
    if not diffs:
        return "not measured"
    mean = sum(diffs) / len(diffs)
    p = test.p if test is not None else math.nan
    if mean > 0:
        return "reproduces" if p < SIGNIFICANCE else "same direction, not significant"
    return "reversed (significant)" if p < SIGNIFICANCE else "does not reproduce"


def compare(records: Sequence[dict[str, Any]], metric: str, better: dict[str, Any],
            base: dict[str, Any]) -> dict[str, Any]:
    """Paired comparison of two settings on ``metric``: mean difference (points), t, p, verdict."""
    a, b = paired(records, metric, better, base)
    test = paired_ttest(a, b)
    diffs = [x - y for x, y in zip(a, b)]
    return {"diff": mean_std(diffs), "t": test.t, "p": test.p, "n": test.n, "verdict": verdict(diffs, test)}


def fmt_p(p: float) -> str:
    return "—" if math.isnan(p) else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def fmt_seeds(seeds: Sequence[int]) -> str:
    """'0-4' for consecutive seeds, else '0, 2, 3'."""
    return (f"{seeds[0]}-{seeds[-1]}" if len(seeds) > 1 and list(seeds) == list(range(seeds[0], seeds[-1] + 1))
            else ", ".join(map(str, seeds)))


def claim_verdict(mean_diff: float, p_holm: float, alpha: float = SIGNIFICANCE) -> str:
    """Resolved when the family's Holm-adjusted p is below ``alpha``: as in the paper when the mean of
    better - worse is positive, contradicted when negative; else not resolved."""
    if math.isnan(p_holm) or p_holm >= alpha:
        return UNRESOLVED
    return HOLDS if mean_diff > 0 else CONTRADICTED


def gains_by(records: Records, field: str, metric: str = "mAP@R", base: str = "SupAP",
             new: str = "ROADMAP") -> dict[Any, list[float]]:
    """{value of ``field``: per-seed relative gains (%) of ``new`` over ``base``}, seeds paired."""
    out: dict[Any, list[float]] = {}
    for value in sorted({r["params"][field] for r in records if field in r["params"]}):
        a, b = paired(records, metric, {"method": new, field: value}, {"method": base, field: value})
        out[value] = [relative_gain(x, y) for x, y in zip(a, b)]
    return out


def epoch_minutes(record: dict[str, Any]) -> float:
    """Minutes per epoch of a run: its late-run seconds per step x steps per epoch."""
    per_step = record.get("seconds_per_step_late", record["seconds_per_step"])
    return per_step * record["steps_per_epoch"] / 60.0


# ------------------------------------------------------------------ protocol v2: adjacent pairs, Holm
class Interval(NamedTuple):
    mean: float
    low: float
    high: float
    n: int


def paired_interval(diffs: Sequence[float], level: float = 0.95) -> Interval:
    """Mean of paired differences and its two-sided t interval at ``level`` (nan bounds for n < 2)."""
    s = mean_std(diffs)
    if s.n < 2:
        return Interval(s.mean, math.nan, math.nan, s.n)
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, s.n - 1)) * s.std / math.sqrt(s.n)
    return Interval(s.mean, s.mean - half, s.mean + half, s.n)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error control), in the order given.

    Sorted ascending, p_(i) is multiplied by (m - i) and the running maximum is kept, capped at 1.
    A nan p-value (a comparison that could not be tested) stays nan and does not count in m.
    """
    tested = sorted((p, i) for i, p in enumerate(pvalues) if not math.isnan(p))
    m = len(tested)
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


RESOLVED, REVERSED, UNRESOLVED = "resolved, as in the paper", "resolved, reversed", "not resolved"


def adjacent_verdict(mean_diff: float, adjusted_p: float, alpha: float = SIGNIFICANCE) -> str:
    """The rule of protocol v2, fixed before its results: a pair (paper-better minus paper-worse) is
    resolved when its Holm-adjusted paired p is below ``alpha``, in the paper's direction when the mean
    difference is positive."""
    if math.isnan(adjusted_p) or adjusted_p >= alpha:
        return UNRESOLVED
    return RESOLVED if mean_diff > 0 else REVERSED


def adjacent_pairs(records: Records, order: Sequence[str], metric: str) -> list[dict[str, Any]]:
    """For each adjacent pair (worse, better) of ``order`` (worst first, as the paper ranks them): the
    per-seed differences better - worse of ``metric``, their mean and 95 % interval, the paired t-test,
    the Holm-adjusted p over all the pairs, and the verdict of ``adjacent_verdict``."""
    rows = []
    for worse, better in zip(order, order[1:]):
        a, b = paired(records, metric, {"method": better}, {"method": worse})
        diffs = [x - y for x, y in zip(a, b)]
        rows.append({"better": better, "worse": worse, "diffs": diffs, "interval": paired_interval(diffs),
                     "test": paired_ttest(a, b)})
    for row, p in zip(rows, holm([r["test"].p for r in rows])):
        row["p_holm"] = p
        row["verdict"] = adjacent_verdict(row["interval"].mean, p)
    return rows


def seed_ranks(records: Records, methods: Sequence[str], metric: str) -> dict[str, list[int]]:
    """{method: its rank among ``methods`` in each seed (1 = best ``metric``)}, over the seeds where
    every method was measured; ties share the better rank."""
    by_seed: dict[int, dict[str, float]] = {}
    for r in records:
        if r["method"] in methods:
            by_seed.setdefault(r["seed"], {})[r["method"]] = float(r[metric])
    ranks: dict[str, list[int]] = {m: [] for m in methods}
    for seed in sorted(by_seed):
        values = by_seed[seed]
        if len(values) < len(methods):
            continue
        for m in methods:
            ranks[m].append(1 + sum(1 for other in methods if values[other] > values[m]))
    return ranks


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table (the page's tables, the dashboard's and the notebooks')."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])
