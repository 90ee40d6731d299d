"""A release that does not load with the pinned NumPy gets the newest older era that
loads, and says so (harness/versions/era.py, envs.build_loading); offline: the builds
are stand-ins, the ladder and what is recorded are real."""

import pytest

from harness.frameworks import get
from harness.versions import envs, era

PINNED = ["autograd==1.6", "numpy==2.4.6", "scipy==1.17.1"]


def test_each_step_relaxes_only_numpy_and_scipy():
    assert era.relaxed(PINNED, era.LADDER[0]) == ["autograd==1.6", "numpy<2", "scipy"]
    # 2017's era: NumPy before 1.24 (np.int), a SciPy that accepts it, and `future` for autograd
    adds = get("autograd").era_requires[era.LADDER[1][0]]
    assert era.relaxed(PINNED, era.LADDER[1], adds) == ["autograd==1.6", "numpy<1.24", "scipy<1.16", "future"]
    assert era.relaxed(PINNED, era.LADDER[1]) == ["autograd==1.6", "numpy<1.24", "scipy<1.16"]
    assert era.relaxed(["jax==0.4.38", "numpy==2.4.6"], era.LADDER[0]) == ["jax==0.4.38", "numpy<2"]


def test_differs_names_the_pins_the_environment_does_not_have():
    installed = {"autograd": "1.6", "numpy": "1.26.4", "scipy": "1.17.1"}
    assert era.differs(PINNED, installed) == {"numpy": {"pinned": "2.4.6", "installed": "1.26.4"}}


def test_the_first_era_that_loads_is_kept_and_recorded(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    tried = []

    def build(name, requirements, pip_options=(), dists=(), extra_steps=(), annotate=None, python=None):
        tried.append(list(requirements))
        if "numpy==2.4.6" in requirements:  # the pinned NumPy: autograd 1.6 does not load
            raise era.LoadFailed("autograd does not load (exit 1); Python's last lines:\n"
                                 "AttributeError: module 'numpy' has no attribute 'msort'")
        manifest = {"versions": {"autograd": "1.6", "numpy": "1.26.4", "scipy": "1.17.1"}}
        return envs.Env(str(tmp_path / name), annotate(manifest) if annotate else manifest)

    monkeypatch.setattr(envs, "build", build)
    monkeypatch.setattr(envs, "runtime_pins", lambda exclude=(), also=(): ["numpy==2.4.6", "scipy==1.17.1"])
    found = envs.for_version(get("autograd"), "1.6")
    assert tried == [PINNED, ["autograd==1.6", "numpy<2", "scipy"]]
    assert found.manifest["dependency_differs"] == {"numpy": {"pinned": "2.4.6", "installed": "1.26.4"}}
    assert found.manifest["era_reason"] == "AttributeError: module 'numpy' has no attribute 'msort'"


def test_no_era_loads_is_the_pinned_attempts_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))

    def build(name, requirements, **_):
        raise era.LoadFailed(f"does not load with {requirements[1]}")

    monkeypatch.setattr(envs, "build", build)
    monkeypatch.setattr(envs, "runtime_pins", lambda exclude=(), also=(): ["numpy==2.4.6"])
    with pytest.raises(era.LoadFailed, match="numpy==2.4.6"):
        envs.for_version(get("autograd"), "1.0.1")


def test_a_failure_not_about_numpy_is_not_retried_with_older_eras(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    tried = []

    def build(name, requirements, **_):
        tried.append(requirements)
        raise era.LoadFailed("tinygrad does not load (exit 1); Python's last lines:\n"
                             "AttributeError: module 'tinygrad.helpers' has no attribute 'NUM_CPU_THREADS'")

    monkeypatch.setattr(envs, "build", build)
    monkeypatch.setattr(envs, "runtime_pins", lambda exclude=(), also=(): ["numpy==2.4.6"])
    with pytest.raises(era.LoadFailed, match="NUM_CPU_THREADS"):
        envs.for_version(get("tinygrad"), "0.10.0")
    assert len(tried) == 1  # no NumPy would help: one build, not three


def test_a_release_pip_cannot_install_with_the_pinned_numpy_climbs_the_ladder_too(monkeypatch, tmp_path):
    # TensorFlow 2.17 requires numpy<2: pip's resolver refuses the pinned NumPy 2, so the
    # install itself fails, naming NumPy in its last lines (the command line, which
    # always names the pin, does not count)
    monkeypatch.setenv("GRADMEM_ENV_DIR", str(tmp_path))
    tried = []

    def build(name, requirements, pip_options=(), dists=(), extra_steps=(), annotate=None, python=None):
        tried.append(list(requirements))
        if "numpy==2.4.6" in requirements:
            raise envs.Unavailable(f"pip install {' '.join(requirements)} failed (exit 1); the installer's last "
                                   "lines:\ntensorflow-cpu 2.17.0 depends on numpy<2.0.0 and >=1.26.0")
        manifest = {"versions": {"tensorflow-cpu": "2.17.0", "numpy": "1.26.4"}}
        return envs.Env(str(tmp_path / name), annotate(manifest) if annotate else manifest)

    monkeypatch.setattr(envs, "build", build)
    monkeypatch.setattr(envs, "runtime_pins", lambda exclude=(), also=(): ["numpy==2.4.6"])
    found = envs.for_version(get("tensorflow"), "2.17.0")
    assert tried[1][1:] == ["numpy<2"]
    assert found.manifest["dependency_differs"] == {"numpy": {"pinned": "2.4.6", "installed": "1.26.4"}}


def test_era_requirements_name_eras_of_the_ladder():
    from harness import frameworks

    labels = {label for label, _ in era.LADDER}
    for name in frameworks.NAMES:
        assert set(get(name).era_requires) <= labels, (name, get(name).era_requires)
