"""pyroinv.settings: one place for the package's switches, each readable, settable, scoped and env-backed."""
import pytest

import pyroinv.settings as settings
from pyroinv.data.cache import default_cache_dir, downloads_allowed
from pyroinv.inference.step_graph import enabled_by_environment
from pyroinv.model import kernels


def test_every_setting_has_a_value_and_an_unknown_one_is_named():
    assert set(settings.get()) == {"kernels", "cuda_graph", "cache_dir", "data_root", "offline", "kept_results"}
    with pytest.raises(KeyError, match="unknown pyroinv setting.*fast"):
        settings.set(fast=True)


def test_a_context_is_scoped_and_the_switches_read_it():
    assert kernels.enabled()
    with settings.context(kernels=False):
        assert not kernels.enabled()
        with kernels.plain():
            assert settings.get("kernels") is False
    assert kernels.enabled() and settings.get("kernels") is True


def test_environment_variables_are_read_when_the_setting_is(monkeypatch, tmp_path):
    monkeypatch.setenv("PYROINV_CUDA_GRAPH", "off")
    assert enabled_by_environment() is False
    with settings.context(cuda_graph=True):  # a given value takes precedence over the environment
        assert enabled_by_environment() is True
    monkeypatch.setenv("PYROINV_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.setenv("PYROINV_OFFLINE", "1")
    assert downloads_allowed(None) is False and downloads_allowed(True) is True
    monkeypatch.setenv("PYROINV_OFFLINE", "0")
    assert downloads_allowed(None) is True
