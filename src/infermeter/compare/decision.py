"""One sequential decision: is NEW slower (or faster) than BASE by at least δ? Pure: no measuring, no printing.

The observations are paired, interleaved rounds: per round, log(new round median / base round median), in which a
change of the machine's speed between rounds cancels (`measure.interleave`). The rule is a GSPRT, as Fishtest
(Stockfish) runs it in production: Wald's sequential probability ratio test on Gaussian log-ratios whose variance
is unknown, replaced by its maximum-likelihood estimate under each hypothesis (the generalised likelihood ratio).
Two one-sided tests run side by side (the Sobel–Wald three-decision procedure), in log space with
θ₀ = log(1 + δ₀) and θ₁ = log(1 + δ), over the n counted rounds x with mean x̄:
- up:   H0 θ ≤ +θ₀ against H1 θ ≥ +θ₁ (slower), LLR = n/2 · log(σ̂²(min(x̄, θ₀)) / σ̂²(max(x̄, θ₁)));
- down: H0 θ ≥ −θ₀ against H1 θ ≤ −θ₁ (faster), mirrored; σ̂²(θ) = mean((x − θ)²).
Each stops at Wald's bounds: H1 once LLR ≥ log((1 − β) / (α/2)), H0 once LLR ≤ log(β / (1 − α/2)); a test that
has accepted H0 is no longer watched. Outcomes: *different* (slower or faster) as soon as one test accepts H1;
*same* once both accepted H0 (no change of δ or more; consistent with one within δ₀); *unknown* when the budget of
rounds runs out first. So P(different | |change| ≤ δ₀) ≤ α and P(not caught | change ≥ δ) ≤ β, approximately
(Wald's bounds ignore the overshoot and the variance is estimated, hence `min_rounds` before any stop; the
simulations of tests/test_decision.py hold the rates on seeded streams with drift and outliers). A pooled variance
plugged into the Gaussian LLR, tried first, let 1.6% false alarms through at α = 1% on noisy streams: a mean far
from a hypothesis widens that hypothesis's own variance here, which keeps a few lucky rounds from deciding.

Why a GSPRT rather than an always-valid confidence sequence: the question has an indifference zone (δ₀, δ) and
a stated miss rate β at δ, which the SPRT is built for and which minimises the expected rounds at δ₀ and δ (Wald &
Wolfowitz 1948); a confidence sequence states no β, and reaching *same* needs its width below 2δ₀, which costs
several times the rounds. Re-applying a fixed-n test after every round is what this avoids: it inflates a nominal
5% false-alarm rate to 16–37%.

Rounds flagged as disturbed (`decision_rounds`: other work took more of the CPUs during one side's burst than the
other's, `measure.interference`) are set aside: not counted, but spent from the budget. The decision gates the
median: a P99 needs about 662 samples per side before MLPerf's early stopping can bound it, and its per-round
values are not recorded (`gated_metric`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, asdict, dataclass, replace
from typing import Any

from infermeter.core.errors import UsageError

# The gate's defaults: a false alarm at most 1 time in 100, a slowdown of 5% the one to catch (compare's
# --alpha and --threshold, check's too).
DEFAULT_ALPHA = 0.01
DEFAULT_THRESHOLD = 0.05

RULE = "GSPRT: two one-sided Wald SPRTs on paired log-ratios, Gaussian, variance estimated (as Fishtest)"
# β at δ as Fishtest runs it (α = β = 0.05). α stays compare's --alpha (0.01): the gate's false-alarm rate is
# what it was before this rule.
DEFAULT_BETA = 0.05
# δ₀ = δ × this when not given: "same" means within a fifth of the threshold (1% for the 5% gate). Tied to δ so
# that a smaller --threshold keeps a sensible indifference zone; a fixed 1% would make --threshold 1% invalid.
SAME_SHARE = 0.2
# No stop before this many counted rounds: the variance estimate of fewer rounds can be small by chance, and a
# plugged-in variance that is too small makes the test stop too early (false alarms). Even: the rounds' order is
# ABBA (`measure.interleave.round_orders`), balanced over pairs of rounds.
DEFAULT_MIN_ROUNDS = 6
DEFAULT_BUDGET_ROUNDS = 60
MLPERF_P99_MIN_SAMPLES = 662  # MLPerf Inference early stopping: the fewest queries for which a P99 can be bounded
OUTCOMES = ("different", "same", "unknown")
# The CLI flag of each parameter (what an error names).
FLAGS = {
    "alpha": "--alpha",
    "beta": "--beta",
    "delta": "--threshold",
    "delta_same": "--same-within",
    "min_rounds": "--rounds",
    "budget_rounds": "--budget-rounds",
}
_VARIANCE_FLOOR = 1e-12  # identical rounds (a constant synthetic case): no spread, but no division by zero


@dataclass(frozen=True)
class DecisionParams:
    """α: false alarm (*different* when the change is within δ₀, both directions together); β: miss (*same* or
    *faster* when NEW is slower by δ, each direction); δ: the change that matters (a fraction, 0.05 = 5%); δ₀:
    within this a change counts as none (None: δ × SAME_SHARE); rounds: at least `min_rounds` counted before a
    stop, at most `budget_rounds` run (counted or set aside)."""

    alpha: float = DEFAULT_ALPHA
    beta: float = DEFAULT_BETA
    delta: float = DEFAULT_THRESHOLD
    delta_same: float | None = None
    min_rounds: int = DEFAULT_MIN_ROUNDS
    budget_rounds: int = DEFAULT_BUDGET_ROUNDS

    @property
    def same_within(self) -> float:
        """δ₀ as used."""
        return self.delta * SAME_SHARE if self.delta_same is None else self.delta_same

    def checked(self, flags: Mapping[str, str] = FLAGS) -> DecisionParams:
        """Self with δ₀ filled in, every value checked: UsageError naming the flag (`flags`) and its accepted range."""
        for key in ("alpha", "beta"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and 0 < value < 0.5):
                raise UsageError(f"{flags[key]} {value:g} is out of range: it must lie in (0, 0.5), e.g. 0.05")
        if not (math.isfinite(self.delta) and self.delta > 0):
            raise UsageError(f"{flags['delta']} {self.delta:.4g} is out of range: it must be > 0, e.g. 5%")
        same = self.same_within
        if not (0 <= same < self.delta):
            raise UsageError(
                f"{flags['delta_same']} {same:.4g} is out of range: it must lie in [0, {flags['delta']}) = "
                f"[0, {self.delta:.4g})"
            )
        if self.min_rounds < 2:
            raise UsageError(f"{flags['min_rounds']} {self.min_rounds} is out of range: it must be at least 2")
        if self.budget_rounds < self.min_rounds:
            raise UsageError(
                f"{flags['budget_rounds']} {self.budget_rounds} is out of range: it must be at least "
                f"{flags['min_rounds']} ({self.min_rounds})"
            )
        return replace(self, delta_same=same)

    @property
    def bounds(self) -> tuple[float, float]:
        """Wald's bounds on each one-sided LLR: (accept H0 at or below, accept H1 at or above)."""
        half = self.alpha / 2
        return math.log(self.beta / (1 - half)), math.log((1 - self.beta) / half)


@dataclass(frozen=True)
class Decision:
    """The record of one decision: the rule and its parameters, the outcome (`different` with `direction`
    slower/faster, `same`, `unknown`), rounds counted and set aside, why it stopped, and where it stood: the
    geometric-mean ratio new/base of the counted rounds with its 95% t-interval at the stop (descriptive: the
    error rates are the rule's, not this interval's) and the rounds' spread, the two LLRs and their bounds."""

    rule: str
    metric: str
    _: KW_ONLY  # the rest by keyword
    alpha: float
    beta: float
    delta: float
    delta_same: float
    min_rounds: int
    budget_rounds: int
    outcome: str
    direction: str | None
    rounds_used: int
    rounds_set_aside: int
    stopped_by: str
    ratio: float | None
    interval: tuple[float, float] | None
    log_ratio_sd: float | None  # the counted rounds' standard deviation of log(new / base)
    llr: tuple[float, float]
    bounds: tuple[float, float]
    notes: tuple[str, ...] = ()

    @property
    def slower(self) -> bool:
        """True when decided: NEW is slower by δ (what fails a gate)."""
        return self.outcome == "different" and self.direction == "slower"

    def summary(self) -> str:
        """One line: the outcome, the ratio and interval reached, the rounds and why it stopped."""
        what = f"{self.outcome} ({self.direction})" if self.direction else self.outcome
        where = ""
        if self.ratio is not None and self.interval is not None:
            where = f", new/base {self.ratio:.3f}x [{self.interval[0]:.3f}, {self.interval[1]:.3f}]"
        aside = f", {self.rounds_set_aside} set aside" if self.rounds_set_aside else ""
        return (
            f"{what}{where} after {self.rounds_used} rounds{aside}: {self.stopped_by} "
            f"(GSPRT α={self.alpha:g} β={self.beta:g} δ={self.delta:.1%} δ₀={self.delta_same:.1%})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values."""
        return asdict(self)


class SequentialTest:
    """The GSPRT fed one round at a time (`add`); `decision` once `done`, or `finish` for where it stands."""

    def __init__(self, params: DecisionParams = DecisionParams(), metric: str = "p50", notes: Iterable[str] = ()):
        self.params = params.checked()
        self.metric, self.notes = metric, tuple(notes)
        self.count, self.total, self.squares = 0, 0.0, 0.0
        self.rounds_run, self.set_aside = 0, 0
        self.up: str | None = None  # None while watched, else "H0" or "H1"
        self.down: str | None = None
        self.decision: Decision | None = None

    @property
    def done(self) -> bool:
        """True once decided or out of budget."""
        return self.decision is not None

    def add(self, log_ratio: float, disturbed: bool = False) -> Decision | None:
        """One round's log(new / base); a disturbed round (or a non-finite ratio) is set aside. The decision once
        there is one (further rounds are ignored), else None."""
        if self.decision is not None:
            return self.decision
        self.rounds_run += 1
        if disturbed or not math.isfinite(log_ratio):
            self.set_aside += 1
        else:
            self.count += 1
            self.total += log_ratio
            self.squares += log_ratio * log_ratio
            if self.count >= self.params.min_rounds:
                self._judge()
        if self.decision is None and self.rounds_run >= self.params.budget_rounds:
            self.decision = self._record("unknown", None, f"budget of {self.params.budget_rounds} rounds spent")
        return self.decision

    def llrs(self) -> tuple[float, float]:
        """(up, down) generalised log-likelihood ratios of the counted rounds (0 before two): Gaussian, the variance
        estimated under each hypothesis by maximum likelihood, LLR = n/2 · log(σ̂²(H0) / σ̂²(H1)) with
        σ̂²(θ) = mean((x − θ)²). Unlike one pooled variance plugged into both, a mean far from a hypothesis
        widens that hypothesis's own variance, which keeps a few lucky rounds from deciding."""
        if self.count < 2:
            return 0.0, 0.0
        theta0, theta1 = math.log1p(self.params.same_within), math.log1p(self.params.delta)
        n = self.count

        def spread(theta: float) -> float:  # mean((x - theta)²) from the running sums
            return max((self.squares - 2 * theta * self.total) / n + theta * theta, _VARIANCE_FLOOR)

        mean = self.total / n
        # Composite hypotheses, each fitted by its closest θ: up's H0 is θ ≤ θ₀ and H1 θ ≥ θ₁ (down: mirrored), so a
        # change well beyond δ decides at once instead of being penalised for missing δ exactly.
        up = n / 2 * math.log(spread(min(mean, theta0)) / spread(max(mean, theta1)))
        down = n / 2 * math.log(spread(max(mean, -theta0)) / spread(min(mean, -theta1)))
        return up, down

    def _judge(self) -> None:
        low, high = self.params.bounds
        up, down = self.llrs()
        if self.up is None:
            self.up = "H1" if up >= high else "H0" if up <= low else None
        if self.down is None:
            self.down = "H1" if down >= high else "H0" if down <= low else None
        if self.up == "H1":
            self.decision = self._record("different", "slower", f"slower by δ accepted (LLR {up:.2f} ≥ {high:.2f})")
        elif self.down == "H1":
            self.decision = self._record("different", "faster", f"faster by δ accepted (LLR {down:.2f} ≥ {high:.2f})")
        elif self.up == "H0" and self.down == "H0":
            self.decision = self._record("same", None, f"both directions accepted 'within δ₀' (LLR ≤ {low:.2f})")

    def finish(self, why: str) -> Decision:
        """The decision, or `unknown` now (measuring stopped before the rule did: `why`)."""
        if self.decision is None:
            self.decision = self._record("unknown", None, why)
        return self.decision

    def _record(self, outcome: str, direction: str | None, why: str) -> Decision:
        p = self.params
        ratio, interval = self._interval()
        sd = math.sqrt(self._variance()) if self.count >= 2 else None
        return Decision(
            RULE,
            self.metric,
            alpha=p.alpha,
            beta=p.beta,
            delta=p.delta,
            delta_same=p.same_within,
            min_rounds=p.min_rounds,
            budget_rounds=p.budget_rounds,
            outcome=outcome,
            direction=direction,
            rounds_used=self.count,
            rounds_set_aside=self.set_aside,
            stopped_by=why,
            ratio=ratio,
            interval=interval,
            log_ratio_sd=sd,
            llr=self.llrs(),
            bounds=p.bounds,
            notes=self.notes,
        )

    def _variance(self) -> float:
        mean = self.total / self.count
        return max((self.squares - self.count * mean * mean) / (self.count - 1), 0.0)

    def _interval(self) -> tuple[float | None, tuple[float, float] | None]:
        if self.count == 0:
            return None, None
        mean = self.total / self.count
        if self.count < 2:
            return math.exp(mean), None
        from scipy.stats import t

        half = float(t.ppf(0.975, self.count - 1)) * math.sqrt(self._variance() / self.count)
        return math.exp(mean), (math.exp(mean - half), math.exp(mean + half))


def decide(
    log_ratios: Iterable[float], params: DecisionParams = DecisionParams(), disturbed: Iterable[bool] = ()
) -> Decision:
    """Run the rule over a stream of per-round log-ratios (with their disturbed flags, default none), stopping at
    the first decision; `unknown` when the stream ends first."""
    test = SequentialTest(params)
    flags = iter(disturbed)
    for value in log_ratios:
        if test.add(value, next(flags, False)) is not None:
            break
    return test.finish(f"the rounds ran out after {test.rounds_run}, before the budget")


def fixed_horizon_rounds(params: DecisionParams, sd: float) -> int:
    """Rounds a fixed-n test of the same hypotheses needs for the same α (two-sided) and β at δ, with the per-round
    log-ratio standard deviation `sd` known: ((z(1−α/2) + z(1−β)) · sd / (θ₁ − θ₀))²."""
    from scipy.stats import norm

    p = params.checked()
    gap = math.log1p(p.delta) - math.log1p(p.same_within)
    z = float(norm.ppf(1 - p.alpha / 2) + norm.ppf(1 - p.beta))
    return max(2, math.ceil((z * sd / gap) ** 2))


def gated_metric(metric: str, samples_per_side: int) -> tuple[str, str | None]:
    """The metric a sequential decision gates, and why when it is not the one asked for: a P99 is gated only from
    MLPERF_P99_MIN_SAMPLES samples per side, and rounds record a median per side only, so the median it is."""
    if metric == "p99" and samples_per_side < MLPERF_P99_MIN_SAMPLES:
        return "p50", (
            f"P99 not gated: {samples_per_side} samples per side, fewer than the {MLPERF_P99_MIN_SAMPLES} MLPerf's "
            "early stopping needs for a P99; gated on the median"
        )
    if metric != "p50":
        return "p50", f"{metric} not gated: rounds record a median per side only; gated on the median"
    return "p50", None
