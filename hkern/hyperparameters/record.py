"""The record of a hyperparameter selection, kept on the fitted model as ``selection_``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._model import format_sigma

__all__ = ["Candidate", "HyperparameterSelection"]


@dataclass(frozen=True)
class Candidate:
    """One evaluation of the selection criterion on the full data.

    Attributes
    ----------
    sigma : float or ndarray (d,)
        The bandwidth or lengthscales evaluated.
    lam : float
        The ridge evaluated.
    value : float
        The criterion (larger is better; -inf when the fit failed, e.g. a kernel matrix that is
        not positive definite at that lam).
    seconds : float
        Wall time of the evaluation (one fit, and for hold-out its predictions).
    """

    sigma: object
    lam: float
    value: float
    seconds: float


@dataclass
class HyperparameterSelection:
    """How a fit chose ``sigma`` and ``lam`` (the model's ``selection_``).

    Attributes
    ----------
    sigma_mode : {"auto", "ard", "given"}
        What was asked for sigma: an isotropic bandwidth, per-feature lengthscales, or the value
        given (only lam selected).
    lam_mode : {"auto", "given"}
    criterion : str
        What the search on the full data maximised: ``"profiled log marginal likelihood"`` (the
        Gaussian log-likelihood of the training targets under the method's own kernel with
        the signal variance at its maximum) or ``"hold-out negative mean squared error"``.
    subsample_size : int
        Points of the exact GP whose type-II maximum likelihood gave the starting point (0 when
        nothing was learnt on a subsample).
    subsample_lml : float or None
        Its log marginal likelihood at the optimum (standardised targets).
    subsample_sigma, subsample_lam : float or ndarray, float
        The starting point it gave (in the units of X and of lam).
    subsample_seconds : float
    candidates : list of Candidate
        Every evaluation on the full data, in order.
    best : int
        Index of the chosen candidate.
    sigma, lam : (properties)
        The selected values, the chosen candidate's (the model's ``sigma_`` and ``lam_``).
    seconds : float
        Wall time of the whole selection, the final fit included.
    refit_seconds : float
        Of that, the final fit on all the data: the chosen values fitted to y (the candidates
        fit y / rms(y) on a grid, so that c * y makes the same choice; their ``value`` is put
        back in y's units).  0 for classification by likelihood: the best evaluation is the
        fitted model.
    lam_profiled : bool
        Each candidate's lam was chosen by its fit, the best for its sigma (Nystrom and random
        features with ``lam="auto"``: their Gram matrix gives the likelihood of every lam).
    isotropic_from : int
        With ``sigma="ard"`` (and more than one feature): the index of the first candidate of
        the search over one bandwidth that the per-feature search is compared with, by the
        same criterion; the better end point is chosen, so ``sigma_`` is a float when the
        isotropic one won.  -1 otherwise.
    leave_one_out : tuple of two floats or None
        When the per-feature end won by the criterion: the mean squared leave-one-out error
        of the exact kernel ridge at the per-feature and at the isotropic end, on
        ``leave_one_out_rows`` random rows (targets scaled to rms 1); the per-feature end is
        kept only if its error is not larger (:mod:`hkern.hyperparameters.leave_one_out`).
    leave_one_out_rows : int
    leave_one_out_seconds : float
    """

    sigma_mode: str
    lam_mode: str
    criterion: str
    subsample_size: int = 0
    subsample_lml: object = None
    subsample_sigma: object = None
    subsample_lam: object = None
    subsample_seconds: float = 0.0
    candidates: list = field(default_factory=list)
    best: int = -1
    seconds: float = 0.0
    refit_seconds: float = 0.0
    lam_profiled: bool = False
    isotropic_from: int = -1
    leave_one_out: object = None
    leave_one_out_rows: int = 0
    leave_one_out_seconds: float = 0.0

    @property
    def sigma(self):
        """The selected bandwidth or lengthscales (None before a candidate is chosen)."""
        return self.candidates[self.best].sigma if self.best >= 0 else None

    @property
    def lam(self):
        """The selected ridge (None before a candidate is chosen)."""
        return self.candidates[self.best].lam if self.best >= 0 else None

    @property
    def n_evaluations(self):
        """Number of criterion evaluations (fits) on the full data."""
        return len(self.candidates)

    @property
    def search_seconds(self):
        """Seconds of the evaluations on the full data."""
        return float(sum(c.seconds for c in self.candidates))

    def summary(self):
        """A few lines: the starting point, each candidate, the choice and the time split."""
        profiled = ", each candidate's lam the best for its sigma" if self.lam_profiled else ""
        lines = [f"criterion: {self.criterion} (sigma={self.sigma_mode!r}, "
                 f"lam={self.lam_mode!r}{profiled})"]
        if self.subsample_size:
            lines.append(f"start: exact GP on {self.subsample_size} points, sigma="
                         f"{format_sigma(self.subsample_sigma)} lam={self.subsample_lam:.3g} "
                         f"({self.subsample_seconds:.1f} s)")
        for i, c in enumerate(self.candidates):
            mark = "*" if i == self.best else " "
            lines.append(f"{mark} sigma={format_sigma(c.sigma)} lam={c.lam:.3g} "
                         f"value={c.value:.6g} ({c.seconds:.2f} s)")
        if self.leave_one_out is not None:
            ard, iso = self.leave_one_out
            lines.append(f"leave-one-out on {self.leave_one_out_rows} rows: per feature "
                         f"{ard:.6g}, one bandwidth {iso:.6g} (kept: "
                         f"{'per feature' if ard <= iso else 'one bandwidth'}; "
                         f"{self.leave_one_out_seconds:.1f} s)")
        lines.append(f"total {self.seconds:.1f} s: subsample {self.subsample_seconds:.1f} s, "
                     f"{self.n_evaluations} evaluations {self.search_seconds:.1f} s, refit "
                     f"{self.refit_seconds:.1f} s")
        return "\n".join(lines)

    def __repr__(self):
        lam = "None" if self.lam is None else f"{self.lam:.3g}"
        sigma = "None" if self.sigma is None else format_sigma(np.asarray(self.sigma))
        return (f"HyperparameterSelection(criterion={self.criterion!r}, sigma={sigma}, "
                f"lam={lam}, n_evaluations={self.n_evaluations}, seconds={self.seconds:.2f})")
