"""scikit-learn estimators over hkern's fit functions.

Needs scikit-learn (``pip install "hkern[sklearn]"``); ``import hkern`` never imports it.

The fit functions stay the primary API; each estimator holds its function's keyword arguments
as parameters (same names, same defaults, ``random_state`` for ``seed``), calls the function in
``fit`` and keeps the returned model as ``model_``, to which ``predict`` delegates.

Names: ``<Method><Role>``, with ``<Method>`` the function's name after ``fit_``
(``fit_hierarchical`` -> ``Hierarchical``) and ``<Role>`` one of ``Regressor``,
``Classifier`` (``task="classification"``) and ``Transformer`` (the method's feature map):

* :func:`hkern.fit_exact`: ``ExactRegressor``, ``ExactClassifier``
* :func:`hkern.fit_nystrom`: ``NystromRegressor``, ``NystromClassifier``, ``NystromTransformer``
* :func:`hkern.fit_rff`: ``RFFRegressor``, ``RFFClassifier``, ``RFFTransformer``
* :func:`hkern.fit_hierarchical` (HCK): ``HierarchicalRegressor``, ``HierarchicalClassifier``
* :func:`hkern.fit_independent`: ``IndependentRegressor``, ``IndependentClassifier``
* :func:`hkern.fit_meka`: ``MekaRegressor``, ``MekaClassifier``; :func:`hkern.meka`:
  ``MekaTransformer``
* :func:`hkern.fit_slkl`: ``SlklRegressor``, ``SlklClassifier``
* :func:`hkern.fit_grief`: ``GriefRegressor`` (a Gaussian process: ``predict(X, return_std=True)``)
"""
from .exact import ExactClassifier, ExactRegressor
from .grief import GriefRegressor
from .hierarchical import (
    HierarchicalClassifier,
    HierarchicalRegressor,
    IndependentClassifier,
    IndependentRegressor,
)
from .meka import MekaClassifier, MekaRegressor, MekaTransformer
from .nystrom import NystromClassifier, NystromRegressor, NystromTransformer
from .rff import RFFClassifier, RFFRegressor, RFFTransformer
from .slkl import SlklClassifier, SlklRegressor

__all__ = ["ExactRegressor", "ExactClassifier",
           "NystromRegressor", "NystromClassifier", "NystromTransformer",
           "RFFRegressor", "RFFClassifier", "RFFTransformer",
           "HierarchicalRegressor", "HierarchicalClassifier",
           "IndependentRegressor", "IndependentClassifier",
           "MekaRegressor", "MekaClassifier", "MekaTransformer",
           "SlklRegressor", "SlklClassifier",
           "GriefRegressor"]
