"""Prophet's MAP estimate computed in process: the same posterior mode, no cmdstan run (private).

Prophet fits its Stan model by L-BFGS in a cmdstan child process; on a month of hourly data a
run costs ~0.03 s CPU, about half of it starting the process and parsing the JSON data, and a
forecast makes five or six of them. For the one configuration gpucast runs (linear trend,
``trend_indicator = 0``) the model's negative log posterior, as Stan's optimiser sees it
(``~`` statements drop constants; no Jacobian: the mode in the constrained space), is

    F = k²/50 + m²/50 + Σ|δ|/τ + 2σ² + Σ β²/(2 s²) + T log σ + ‖y − μ‖² / (2σ²)

with ``μ = trend + X (β s_a)`` (additive) or ``trend × (1 + X (β s_m))`` (multiplicative) and
the piecewise-linear ``trend = (k + A δ) t + m − A (t_c δ)``: a least-squares fit with ridge
priors, a lasso on the changepoint slopes δ and a noise scale σ. This module minimises F
directly:

* σ is profiled out: for a residual sum of squares R its optimum solves
  ``4σ⁴ + Tσ² − R = 0``;
* every iteration minimises the Gauss-Newton model of F at the current σ — exact for the
  additive model, whose design is fixed — *with the lasso term kept exact* (a proximal
  Newton step, solved by feature-sign search: an active-set method that ends at the exact
  optimum of the convex subproblem), then takes the best point on the segment to it by
  backtracking on the profiled F;
* it stops when F moves by less than ``RELATIVE_TOLERANCE``.

It reaches F at least as low as cmdstan's L-BFGS with cmdstan's default tolerances, often
lower: L-BFGS is not made for the kinks of ``|δ|`` and stalls near them
(``tests/forecasting/test_prophet_map.py``; on M4, real and synthetic series
``bench/prophet_map_parity.py``). When it does not converge it says so
(:class:`NotConverged`) and the caller runs Prophet's own optimiser instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Stop when the negative log posterior moves by less than this, relatively.
RELATIVE_TOLERANCE = 1e-11
MAX_ITERATIONS = 200
#: Feature-sign steps per subproblem (each one activates, moves or drops a coordinate).
MAX_SUBPROBLEM_STEPS = 500
_PRIOR_KM = 1.0 / 25.0  # k, m ~ normal(0, 5)


class NotConverged(RuntimeError):
    """The in-process optimiser did not reach a stationary point."""


def map_estimate(
    data: Mapping[str, Any], init: Mapping[str, Any], *, max_iterations: int = MAX_ITERATIONS
) -> dict[str, np.ndarray]:
    """Prophet's MAP parameters for ``data`` (its Stan data, ``trend_indicator`` 0) from
    ``init`` (its ``stan_init``, or a previous fit's parameters), each shaped ``(1, n)``."""
    problem = _Problem(data)
    theta = problem.start(init)
    value, sigma2 = problem.value(theta)
    for _ in range(max_iterations):
        target = problem.step_target(theta, sigma2)
        theta_new, value_new, sigma2_new = problem.line_search(theta, value, target)
        moved = value - value_new
        theta, value, sigma2 = theta_new, value_new, sigma2_new
        if moved <= RELATIVE_TOLERANCE * max(1.0, abs(value)):
            break
    else:
        raise NotConverged(f"prophet MAP: no convergence in {max_iterations} iterations")
    if not np.isfinite(value) or not np.all(np.isfinite(theta)):
        raise NotConverged("prophet MAP: non-finite estimate")
    return problem.params(theta, sigma2)


class _Problem:
    """The data of one fit, in the layout ``theta = [k, m, δ (S), β (K)]``."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        if int(data.get("trend_indicator", 0)) != 0:
            raise NotConverged("prophet MAP: only the linear trend is implemented")
        self.y = np.asarray(data["y"], dtype=float)
        if not np.all(np.isfinite(self.y)):
            raise NotConverged("prophet MAP: the history has non-finite values")
        t = np.asarray(data["t"], dtype=float)
        x = np.asarray(data["X"], dtype=float).reshape(len(self.y), -1)
        t_change = np.asarray(data["t_change"], dtype=float).reshape(-1)
        sigmas = np.asarray(data["sigmas"], dtype=float).reshape(-1)
        s_a = np.asarray(data["s_a"], dtype=float).reshape(-1)
        s_m = np.asarray(data["s_m"], dtype=float).reshape(-1)
        self.lam = 1.0 / float(data["tau"])
        self.n = len(self.y)
        self.changepoints = len(t_change)
        self.trend_columns = 2 + self.changepoints
        # the trend's design: t, 1, and each changepoint's ramp (t − t_c)+
        trend = np.empty((self.n, self.trend_columns))
        trend[:, 0] = t
        trend[:, 1] = 1.0
        trend[:, 2:] = np.where(
            t[:, None] >= t_change[None, :], t[:, None] - t_change[None, :], 0.0
        )
        self.trend_design = trend
        self.additive_x = x * s_a
        self.multiplicative_x = x * s_m
        self.multiplicative = bool(np.any(s_m != 0))
        self.prior = np.concatenate(
            [[_PRIOR_KM, _PRIOR_KM], np.zeros(self.changepoints), 1.0 / sigmas**2]
        )
        self.lasso = np.zeros(len(self.prior), dtype=bool)
        self.lasso[2 : self.trend_columns] = True
        if not self.multiplicative:  # the design is fixed: its Gram matrix once
            self.design = np.hstack([trend, self.additive_x])
            self.gram = self.design.T @ self.design

    def start(self, init: Mapping[str, Any]) -> np.ndarray:
        def flat(name: str) -> np.ndarray:
            return np.asarray(init[name], dtype=float).reshape(-1)

        theta = np.concatenate([flat("k"), flat("m"), flat("delta"), flat("beta")])
        if len(theta) != len(self.prior):
            raise NotConverged("prophet MAP: initial values do not fit the data")
        return theta

    def residuals(self, theta: np.ndarray) -> np.ndarray:
        """``y − μ`` (computed from the design, not from the Gram matrix: a near-perfect fit
        would lose its residuals to cancellation)."""
        if not self.multiplicative:
            return self.y - self.design @ theta
        trend, beta = theta[: self.trend_columns], theta[self.trend_columns :]
        mu = (self.trend_design @ trend) * (1.0 + self.multiplicative_x @ beta)
        return self.y - mu - self.additive_x @ beta

    def value(self, theta: np.ndarray) -> tuple[float, float]:
        """The negative log posterior with σ at its optimum, and that σ²."""
        r = self.residuals(theta)
        rss = float(r @ r)
        sigma2 = (np.sqrt(self.n * self.n + 16.0 * rss) - self.n) / 8.0
        if sigma2 <= 0.0:
            return np.inf, sigma2
        value = (
            0.5 * float(self.prior @ (theta * theta))
            + self.lam * float(np.abs(theta[self.lasso]).sum())
            + 2.0 * sigma2
            + 0.5 * self.n * np.log(sigma2)
            + rss / (2.0 * sigma2)
        )
        return value, sigma2

    def _gauss_newton(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient and Gauss-Newton Hessian of the residual sum of squares at ``theta``."""
        r = self.residuals(theta)
        if not self.multiplicative:
            return -2.0 * (self.design.T @ r), 2.0 * self.gram
        trend, beta = theta[: self.trend_columns], theta[self.trend_columns :]
        level = self.trend_design @ trend
        scale = 1.0 + self.multiplicative_x @ beta
        jacobian = np.hstack(
            [
                self.trend_design * scale[:, None],
                self.multiplicative_x * level[:, None] + self.additive_x,
            ]
        )
        return -2.0 * (jacobian.T @ r), 2.0 * (jacobian.T @ jacobian)

    def step_target(self, theta: np.ndarray, sigma2: float) -> np.ndarray:
        """The minimiser of the Gauss-Newton model of F at ``theta`` (σ fixed), lasso exact."""
        gradient, hessian = self._gauss_newton(theta)
        h = hessian / (2.0 * sigma2)
        h[np.diag_indices_from(h)] += self.prior + 1e-12
        # model: ½ zᵀ h z + cᵀ z + λ‖z_δ‖₁, with z the new theta
        c = gradient / (2.0 * sigma2) + self.prior * theta - h @ theta
        return feature_sign(h, c, self.lam, self.lasso, theta)

    def line_search(
        self, theta: np.ndarray, value: float, target: np.ndarray
    ) -> tuple[np.ndarray, float, float]:
        """The first of ``theta + α (target − theta)``, α = 1, ½, ¼ …, that lowers F."""
        direction = target - theta
        alpha = 1.0
        for _ in range(40):
            candidate = theta + alpha * direction
            candidate_value, sigma2 = self.value(candidate)
            if candidate_value <= value:
                return candidate, candidate_value, sigma2
            alpha *= 0.5
        _, sigma2 = self.value(theta)
        return theta, value, sigma2

    def params(self, theta: np.ndarray, sigma2: float) -> dict[str, np.ndarray]:
        columns = self.trend_columns
        return {
            "k": np.array([[theta[0]]]),
            "m": np.array([[theta[1]]]),
            "delta": theta[2:columns].reshape((1, -1)),
            "sigma_obs": np.array([[np.sqrt(sigma2)]]),
            "beta": theta[columns:].reshape((1, -1)),
        }


def feature_sign(
    h: np.ndarray, c: np.ndarray, lam: float, lasso: np.ndarray, start: np.ndarray
) -> np.ndarray:
    """The minimiser of ``½ zᵀ h z + cᵀ z + lam Σ_{j in lasso} |z_j|`` (``h`` positive
    definite) by feature-sign search (Lee, Battle, Raina and Ng 2006), from ``start``: the
    coordinates outside ``lasso`` are always active; the active set's equations are solved
    with each active lasso coordinate's sign fixed, and the best point on the segment to
    that solution (where a coordinate goes through zero it leaves the set) is taken; once
    the solution is reached, the zero lasso coordinate whose gradient exceeds ``lam`` the
    most joins with the sign that lowers the objective. Ends when none does."""
    z = start.copy()
    signs = np.where(lasso, np.sign(z), 0.0)
    active = ~lasso | (z != 0.0)
    # |gradient| - lam of a zero coordinate below this is rounding (gradients are sums of
    # terms of the size of c)
    tolerance = 1e-9 * max(lam, 1e-6 * float(np.max(np.abs(c), initial=0.0)))
    solved = False
    for _ in range(MAX_SUBPROBLEM_STEPS):
        if not solved:
            idx = np.flatnonzero(active)
            goal = np.linalg.solve(h[np.ix_(idx, idx)], -(c[idx] + lam * signs[idx]))
            z, solved = _best_on_segment(h, c, lam, lasso, z, idx, goal)
            dropped = lasso & active & (z == 0.0)
            active &= ~dropped
            signs[dropped] = 0.0
            signs[lasso & active] = np.sign(z[lasso & active])
            continue
        gradient = h @ z + c
        violation = np.where(lasso & ~active, np.abs(gradient) - lam, -np.inf)
        j = int(np.argmax(violation))
        if violation[j] <= tolerance:
            return z
        active[j] = True
        signs[j] = -np.sign(gradient[j])
        solved = False
    raise NotConverged("prophet MAP: the lasso step did not converge")


def _best_on_segment(
    h: np.ndarray,
    c: np.ndarray,
    lam: float,
    lasso: np.ndarray,
    z: np.ndarray,
    idx: np.ndarray,
    goal: np.ndarray,
) -> tuple[np.ndarray, bool]:
    """The lowest objective among ``goal`` and the points where the segment from ``z`` to
    it takes an active lasso coordinate through zero (that coordinate set to exactly 0);
    and whether it is ``goal``."""

    def objective(point: np.ndarray) -> float:
        return float(0.5 * point @ h @ point + c @ point + lam * np.abs(point[lasso]).sum())

    current = z[idx]
    end = z.copy()
    end[idx] = goal
    best, best_value, reached = end, objective(end), True
    crossing = lasso[idx] & (current != 0.0) & (np.sign(goal) != np.sign(current))
    for position in np.flatnonzero(crossing):
        fraction = current[position] / (current[position] - goal[position])
        point = z.copy()
        point[idx] = current + fraction * (goal - current)
        point[idx[position]] = 0.0
        value = objective(point)
        if value < best_value:
            best, best_value, reached = point, value, False
    return best, reached
