"""Data loading (the UCI format), the bundled default set, synthetic data, standardisation."""
import gzip

import numpy as np
import pytest

from hkern.datasets import load_uci, make_regression, standardize


def write_uci(folder, data, mask):
    folder.mkdir(parents=True)
    with gzip.open(folder / "data.csv.gz", "wt") as fh:
        np.savetxt(fh, data, delimiter=",")
    with gzip.open(folder / "test_mask.csv.gz", "wt") as fh:
        np.savetxt(fh, mask.astype(int), delimiter=",", fmt="%d")


@pytest.fixture
def tiny(tmp_path, rng):
    data = rng.normal(size=(12, 4))
    mask = np.zeros((12, 10), dtype=bool)
    for s in range(10):
        mask[[s, (s + 1) % 12], s] = True
    write_uci(tmp_path / "uci" / "tiny", data, mask)
    return tmp_path, data, mask


class TestLoadUci:
    @pytest.mark.parametrize("split", [0, 3, 9])
    def test_reads_the_split(self, tiny, split):
        root, data, mask = tiny
        X_train, y_train, X_test, y_test = load_uci("tiny", split=split, data_dir=root / "uci")
        test = mask[:, split]
        np.testing.assert_array_equal(X_test, data[test, :-1])
        np.testing.assert_array_equal(y_test, data[test, -1])
        np.testing.assert_array_equal(X_train, data[~test, :-1])
        np.testing.assert_array_equal(y_train, data[~test, -1])
        assert X_train.flags.c_contiguous and X_test.flags.c_contiguous

    def test_parent_folder_and_environment_variable(self, tiny, monkeypatch):
        root, data, _ = tiny
        a = load_uci("tiny", data_dir=root)  # the parent of uci/ is accepted too
        monkeypatch.setenv("HKERN_DATA", str(root / "uci"))
        b = load_uci("tiny")
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)

    def test_bundled_kin40k(self, monkeypatch):
        monkeypatch.delenv("HKERN_DATA", raising=False)
        X_train, y_train, X_test, y_test = load_uci()
        assert X_train.shape == (36000, 8) and X_test.shape == (4000, 8)
        assert y_train.shape == (36000,) and np.isfinite(X_train).all()

    def test_bad_split(self, tiny):
        root, _, _ = tiny
        with pytest.raises(ValueError, match=r"split must be an integer in \[0, 9\], got 10"):
            load_uci("tiny", split=10, data_dir=root)
        with pytest.raises(ValueError, match=r"split must be an integer in \[0, 9\], got -1"):
            load_uci("tiny", split=-1, data_dir=root)

    def test_unknown_name_lists_what_is_there(self, tiny):
        root, _, _ = tiny
        with pytest.raises(ValueError, match=r"no data set 'nope' under .* available: \['tiny'\]"):
            load_uci("nope", data_dir=root)

    def test_not_bundled_without_data_dir(self, monkeypatch):
        monkeypatch.delenv("HKERN_DATA", raising=False)
        with pytest.raises(ValueError, match="not bundled with hkern .* HKERN_DATA"):
            load_uci("protein")


class TestSynthetic:
    def test_shapes_and_seed(self):
        X, y = make_regression(500, d=6, seed=3)
        X2, y2 = make_regression(500, d=6, seed=3)
        assert X.shape == (500, 6) and y.shape == (500,)
        np.testing.assert_array_equal(X, X2)
        np.testing.assert_array_equal(y, y2)
        assert np.abs(X).max() <= 1.0

    def test_noise_free_target_is_a_function_of_x(self):
        X, y = make_regression(50, d=3, noise=0.0, seed=1)
        X2, y2 = make_regression(50, d=3, noise=0.0, seed=1)
        np.testing.assert_array_equal(y, y2)

    @pytest.mark.parametrize("kw, msg", [({"n": 0}, "n must be an integer >= 1"),
                                         ({"d": 0}, "d must be an integer >= 1"),
                                         ({"noise": -1.0}, "noise must be a real number >= 0")])
    def test_bad_arguments(self, kw, msg):
        args = {"n": 10, "d": 2} | kw
        with pytest.raises(ValueError, match=msg):
            make_regression(**args)


def test_standardize_uses_training_statistics(rng):
    X_train, X_test = rng.normal(3, 2, size=(100, 3)), rng.normal(3, 2, size=(20, 3))
    X_train[:, 2] = 5.0  # a constant column stays finite
    y_train, y_test = rng.normal(10, 4, size=100), rng.normal(10, 4, size=20)
    Xa, ya, Xb, yb, scale = standardize(X_train, y_train, X_test, y_test)
    np.testing.assert_allclose(Xa[:, :2].mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(Xa[:, :2].std(0), 1, rtol=1e-12)
    np.testing.assert_array_equal(Xa[:, 2], 0.0)
    np.testing.assert_allclose(Xb, (X_test - X_train.mean(0)) / np.where(
        X_train.std(0) == 0, 1, X_train.std(0)), rtol=1e-12)
    assert scale == pytest.approx(y_train.std())
    np.testing.assert_allclose(yb, (y_test - y_train.mean()) / y_train.std(), rtol=1e-12)
