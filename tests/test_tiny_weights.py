"""The shipped tiny weights: every recipe is shipped, a shipped recipe is loaded and never retrained, and retraining
reproduces a shipped file bit for bit."""
import pytest
import torch
from safetensors.torch import load_file

from race_nb.models import WarmStartConfig, shipped_weights, warm_start, warm_start_key
from race_nb.rewards.prm import tiny_artifacts


def test_every_recipe_is_shipped_and_loaded_without_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))  # an empty cache: anything not shipped would train here
    for label, (arch, cfg) in tiny_artifacts().items():
        path = warm_start(arch, cfg)
        assert path == shipped_weights(f"{arch}-{warm_start_key(arch, cfg)}"), label
    assert not (tmp_path / "policies").exists() and "warm start" not in capsys.readouterr().out


def test_retraining_reproduces_the_shipped_weights(tmp_path, monkeypatch):
    "A cheap recipe (the proxy PRM: tiny-s, 600 steps) retrained from scratch equals its shipped file exactly."
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))
    arch, cfg = tiny_artifacts()["proxy_prm"]
    shipped = load_file(shipped_weights(f"{arch}-{warm_start_key(arch, cfg)}") / "model.safetensors")
    fresh = load_file(warm_start(arch, cfg, force=True, progress=False) / "model.safetensors")
    assert set(fresh) == set(shipped)
    diff = {k: (fresh[k] - shipped[k]).abs().max().item() for k in fresh}
    assert all(torch.equal(fresh[k], shipped[k]) for k in fresh), {k: d for k, d in diff.items() if d}


def test_a_changed_recipe_is_not_served_from_the_shipped_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))
    changed = WarmStartConfig(steps=2, batch=4, seed=99)
    assert shipped_weights(f"tiny-s-{warm_start_key('tiny-s', changed)}") is None
    path = warm_start("tiny-s", changed, progress=False)
    assert path.parent == tmp_path / "policies" and (path / "model.safetensors").exists()
