"""hkern.baselines, the former home of the main fits, still works and says where they went.

Every former name of hkern.baselines and of its former submodules, imported as
``from <old module> import <name>``, warns exactly once with a DeprecationWarning naming the
new path, and is the very object at that path.  Run in a fresh interpreter: a shim keeps a name
once read, so a read by an earlier test in the same process would leave nothing to warn.
"""
from fresh_python import run_python

# (former module, name, new module): the documented names and what the former modules held.
MOVED = [
    ("hkern.baselines", "fit_exact", "hkern.exact"),
    ("hkern.baselines", "ExactKRR", "hkern.exact"),
    ("hkern.baselines", "fit_nystrom", "hkern.nystrom"),
    ("hkern.baselines", "NystromKRR", "hkern.nystrom"),
    ("hkern.baselines", "fit_rff", "hkern.features"),
    ("hkern.baselines", "RFFKRR", "hkern.features"),
    ("hkern.baselines", "SolverTrace", "hkern.solvers"),
    ("hkern.baselines.exact", "fit_exact", "hkern.exact"),
    ("hkern.baselines.exact", "ExactKRR", "hkern.exact"),
    ("hkern.baselines.exact", "SOLVERS", "hkern.exact.api"),
    ("hkern.baselines.exact", "FORMER_SOLVERS", "hkern.exact.api"),
    ("hkern.baselines.exact", "ExactPCGProblem", "hkern.hyperparameters.exact_pcg_problem"),
    ("hkern.baselines.nystrom", "fit_nystrom", "hkern.nystrom"),
    ("hkern.baselines.nystrom", "nystrom_feature_map", "hkern.nystrom.api"),
    ("hkern.baselines.nystrom", "nystrom_peak_bytes", "hkern.nystrom.api"),
    ("hkern.baselines.nystrom", "check_rcond", "hkern.nystrom.api"),
    ("hkern.baselines.nystrom", "NystromPCGProblem",
     "hkern.hyperparameters.nystrom_pcg_problem"),
    ("hkern.baselines.nystrom_model", "NystromKRR", "hkern.nystrom"),
    ("hkern.baselines.nystrom_model", "NYSTROM_SOLVERS", "hkern.nystrom.checks"),
    ("hkern.baselines.nystrom_model", "check_precision", "hkern.nystrom.checks"),
    ("hkern.baselines.nystrom_model", "check_landmarks", "hkern.oasis.landmarks"),
    ("hkern.baselines.nystrom_model", "uniform_landmarks", "hkern.oasis.landmarks"),
    ("hkern.baselines.nystrom_sharded", "fit_nystrom_sharded", "hkern.nystrom.sharded"),
    ("hkern.baselines.nystrom_sharded", "ShardedNystromProblem",
     "hkern.hyperparameters.sharded_nystrom_problem"),
    ("hkern.baselines.rff", "fit_rff", "hkern.features"),
    ("hkern.baselines.rff", "RFFKRR", "hkern.features"),
    ("hkern.baselines.rff", "rff_peak_bytes", "hkern.features.api"),
    ("hkern.baselines.rff", "rff_features", "hkern.features.rff"),
    ("hkern.baselines.rff", "check_phases", "hkern.features.rff"),
]


def test_every_former_path_warns_once_with_the_new_one_and_gives_the_same_object():
    out = run_python(f"""
        import importlib
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import hkern
        assert not [w for w in caught if issubclass(w.category, DeprecationWarning)
                    and "baselines" in str(w.message)], "import hkern touches hkern.baselines"

        for old, name, new in {MOVED!r}:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                namespace = {{}}
                exec(f"from {{old}} import {{name}}", namespace)
                again = getattr(importlib.import_module(old), name)    # kept: no second warning
            messages = [str(w.message) for w in caught]
            assert len(caught) == 1, (old, name, messages)
            assert caught[0].category is DeprecationWarning, (old, name)
            assert f"{{old}}.{{name}} is deprecated: it is now {{new}}.{{name}}" in messages[0], \\
                messages[0]
            assert caught[0].filename == "<string>", (old, name, caught[0].filename)
            target = getattr(importlib.import_module(new), name)
            assert namespace[name] is target and again is target, (old, name)
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_star_import_and_the_former_module_attributes_still_work():
    out = run_python("""
        import warnings

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from hkern.baselines import *   # noqa: F403
            import hkern.baselines.exact as former
            model = fit_exact.__name__, former.fit_exact.__name__
        import hkern
        assert fit_exact is hkern.fit_exact and NystromKRR is hkern.NystromKRR
        assert RFFKRR is hkern.RFFKRR and SolverTrace is hkern.solvers.SolverTrace
        assert model == ("fit_exact", "fit_exact")
        assert len(caught) == 8 and {w.category for w in caught} == {DeprecationWarning}
        assert "fit_exact" in dir(former) and "ExactPCGProblem" in dir(former)
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_former_helper_without_a_same_signature_successor_says_where_to_go():
    out = run_python("""
        import hkern.baselines.nystrom as former
        try:
            former.draw_landmarks
        except AttributeError as error:
            assert "hkern.oasis.landmarks.draw_landmarks" in str(error), error
            assert "hkern.select_columns" in str(error), error
        else:
            raise AssertionError("draw_landmarks still read")
        try:
            former.not_a_name
        except AttributeError as error:
            assert "has no attribute 'not_a_name'" in str(error), error
        print("ok")
    """)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
