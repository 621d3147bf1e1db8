"""The UCI regression sets in the GP literature's format (data.csv.gz + test_mask.csv.gz)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .._validation import check_int, read_csv

__all__ = ["load_uci", "BUNDLED", "uci_dir"]

BUNDLED = "kin40k"
_BUNDLED_DIR = Path(__file__).parent / "data"
ENV_VAR = "HKERN_DATA"


def uci_dir(data_dir=None):
    """The folder holding one sub-folder per data set, from the argument or $HKERN_DATA.

    Either the ``uci`` folder itself or its parent may be given.
    """
    root = data_dir if data_dir is not None else os.environ.get(ENV_VAR)
    if root is None:
        return None
    root = Path(root).expanduser()
    if (root / "uci").is_dir():
        root = root / "uci"
    return root


def _locate(name, data_dir):
    root = uci_dir(data_dir)
    if root is not None and (root / name / "data.csv.gz").is_file():
        return root / name
    if name == BUNDLED and data_dir is None:
        return _BUNDLED_DIR / name
    if root is None:
        raise ValueError(
            f"data set {name!r} is not bundled with hkern (only {BUNDLED!r} is); pass data_dir= "
            f"or set the {ENV_VAR} environment variable to the folder holding <name>/data.csv.gz")
    available = sorted(p.name for p in root.iterdir() if (p / "data.csv.gz").is_file()) \
        if root.is_dir() else []
    raise ValueError(f"no data set {name!r} under {root} (expected {root / name / 'data.csv.gz'}); "
                     f"available: {available}")


def load_uci(name=BUNDLED, split=0, data_dir=None):
    """One fixed train/test split of a UCI regression data set.

    Parameters
    ----------
    name : str
        Folder name, e.g. "kin40k", "protein", "elevators".  "kin40k" is bundled with hkern and
        needs no data directory.
    split : int
        Which of the 10 fixed splits (column of test_mask.csv.gz), 0..9.
    data_dir : str or Path, optional
        Folder with one sub-folder per data set (or its parent holding ``uci/``); defaults to
        the ``HKERN_DATA`` environment variable.

    Returns
    -------
    X_train, y_train, X_test, y_test : ndarray
        Inputs (n, d) and targets (n,) in the original units.

    Examples
    --------
    >>> from hkern.datasets import load_uci
    >>> X_train, y_train, X_test, y_test = load_uci("kin40k", split=0)
    >>> X_train.shape, X_test.shape
    ((36000, 8), (4000, 8))
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be a data set name (str), got {name!r}")
    folder = _locate(name, data_dir)
    data = read_csv(folder / "data.csv.gz")
    mask = read_csv(folder / "test_mask.csv.gz").astype(bool)
    split = check_int(split, "split", low=0, high=mask.shape[1] - 1)
    if mask.shape[0] != data.shape[0]:
        raise ValueError(f"{folder}: test_mask has {mask.shape[0]} rows but data has "
                         f"{data.shape[0]}")
    test = mask[:, split]
    X, y = data[:, :-1], data[:, -1]
    return (np.ascontiguousarray(X[~test]), y[~test].copy(), np.ascontiguousarray(X[test]),
            y[test].copy())
