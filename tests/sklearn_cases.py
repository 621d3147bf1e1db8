"""Every hkern.sklearn estimator, its hkern function, and small instances for the tests.

scikit-learn's estimator checks fit on sets of 10 to 200 samples with up to 10 standardised
features: the size arguments are at most 10 (HCK and the independent kernel need r < n, the
smallest sets have 10 samples) and sigma=10 keeps a Gaussian kernel informative in 10
dimensions.  n_jobs=1 only saves thread start-up on a busy machine: results are identical for
any n_jobs.
"""
import hkern
from hkern import sklearn as hs

# estimator class: (the function it calls, the function's parameters it does not expose; the
# estimators fit in one process, so none takes a communicator)
FUNCTIONS = {
    hs.ExactRegressor: (hkern.fit_exact, {"task", "comm"}),
    hs.ExactClassifier: (hkern.fit_exact, {"task", "comm"}),
    hs.NystromRegressor: (hkern.fit_nystrom, {"task", "comm"}),
    hs.NystromClassifier: (hkern.fit_nystrom, {"task", "comm"}),
    hs.NystromTransformer: (hkern.fit_nystrom, {"task", "lam", "criterion", "verbose", "solver",
                                                "tol", "max_iter", "validation", "comm",
                                                "precision"}),
    hs.RFFRegressor: (hkern.fit_rff, {"task"}),
    hs.RFFClassifier: (hkern.fit_rff, {"task"}),
    hs.RFFTransformer: (hkern.fit_rff, {"task", "lam", "criterion", "verbose", "max_memory"}),
    hs.HierarchicalRegressor: (hkern.fit_hierarchical, {"task", "comm"}),
    hs.HierarchicalClassifier: (hkern.fit_hierarchical, {"task", "comm"}),
    hs.IndependentRegressor: (hkern.fit_independent, {"task"}),
    hs.IndependentClassifier: (hkern.fit_independent, {"task"}),
    hs.MekaRegressor: (hkern.fit_meka, {"task"}),
    hs.MekaClassifier: (hkern.fit_meka, {"task"}),
    hs.MekaTransformer: (hkern.meka, {"psd"}),
    hs.SlklRegressor: (hkern.fit_slkl, {"task"}),
    hs.SlklClassifier: (hkern.fit_slkl, {"task"}),
    hs.GriefRegressor: (hkern.fit_grief, set()),
}
ESTIMATORS = list(FUNCTIONS)
SUPERVISED = [c for c in ESTIMATORS if not c.__name__.endswith("Transformer")]
TRANSFORMERS = [c for c in ESTIMATORS if c.__name__.endswith("Transformer")]

# Small settings per method (the size argument and what keeps a fit quick).
SMALL = {
    "Exact": {},
    "Nystrom": {"r": 10},
    "RFF": {"r": 50},
    "Hierarchical": {"r": 9},
    "Independent": {"r": 9},
    "Meka": {"r": 5, "n_clusters": 3},
    "Slkl": {"r": 10},
    # GRIEF learns its hyperparameters: one short search from a small initialisation subset
    "Grief": {"r": 10, "n_restarts": 0, "max_iter": 10, "init_subset": 50},
}


def method_of(cls):
    for role in ("Regressor", "Classifier", "Transformer"):
        if cls.__name__.endswith(role):
            return cls.__name__[:-len(role)]
    raise ValueError(cls.__name__)


def small(cls, **params):
    """A quick instance of ``cls`` for the check data (sigma=10 where it has one; a
    random_state is dropped for the estimators that draw nothing)."""
    settings = {"n_jobs": 1, **SMALL[method_of(cls)], **params}
    own = cls().get_params()
    if "sigma" in own:
        settings.setdefault("sigma", 10.0)
    if "random_state" not in own:
        settings.pop("random_state", None)
    return cls(**settings)


def check_instances():
    """The instances scikit-learn's checks run on: every estimator, and MEKA with both
    solvers (the direct one has no iterations to report)."""
    instances = [small(cls) for cls in ESTIMATORS]
    instances += [small(hs.MekaRegressor, solver="pcg"), small(hs.MekaClassifier, solver="pcg")]
    return instances
