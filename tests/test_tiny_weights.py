"""The shipped tiny weights: every recipe is shipped, a shipped recipe is loaded and never retrained, and retraining
reproduces a shipped file - bit for bit in the environment that shipped it, as equivalent behaviour in any other
(race_nb.retrain; nbs/04a_retrain.ipynb)."""
import json

from race_nb.models import WarmStartConfig, environment_fingerprint, shipped_weights, warm_start, warm_start_key
from race_nb.retrain import check_reproduction, describe_reproduction, fingerprint_diff, load_tolerances
from race_nb.rewards.prm import tiny_artifacts


def test_every_recipe_is_shipped_and_loaded_without_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))  # an empty cache: anything not shipped would train here
    for label, (arch, cfg) in tiny_artifacts().items():
        path = warm_start(arch, cfg)
        assert path == shipped_weights(f"{arch}-{warm_start_key(arch, cfg)}"), label
    assert not (tmp_path / "policies").exists() and "warm start" not in capsys.readouterr().out


def test_every_shipped_recipe_records_its_environment_and_tolerances():
    for label, (arch, cfg) in tiny_artifacts().items():
        folder = shipped_weights(f"{arch}-{warm_start_key(arch, cfg)}")
        env = json.loads((folder / "warm_start.json").read_text()).get("environment")
        assert env is not None and set(env) == set(environment_fingerprint()), label
        tol = load_tolerances(label)
        assert tol and all(0 < t["tolerance"] < 0.2 and t["items"] >= 100 for t in tol.values()), (label, tol)


def test_retraining_reproduces_the_shipped_weights(tmp_path, monkeypatch, all_cores):
    "The cheapest recipe (the proxy PRM: tiny-s, 600 steps) retrained from scratch, judged by the claim that fits this machine."
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))
    r = check_reproduction("proxy_prm")
    print(describe_reproduction(r))
    folder = shipped_weights("tiny-s-" + warm_start_key(*tiny_artifacts()["proxy_prm"]))
    same_env = not fingerprint_diff(environment_fingerprint(), json.loads((folder / "warm_start.json").read_text())["environment"])
    assert r["mode"] == ("bitwise" if same_env else "behaviour")
    assert r["ok"], describe_reproduction(r)
    if same_env: assert r["bitwise"] and r["max_abs_diff"] == 0.0


def test_a_changed_recipe_is_not_served_from_the_shipped_copy(tmp_path, monkeypatch):
    monkeypatch.setenv("RACE_NB_CACHE", str(tmp_path))
    changed = WarmStartConfig(steps=2, batch=4, seed=99)
    assert shipped_weights(f"tiny-s-{warm_start_key('tiny-s', changed)}") is None
    path = warm_start("tiny-s", changed, progress=False)
    assert path.parent == tmp_path / "policies" and (path / "model.safetensors").exists()
    assert json.loads((path / "warm_start.json").read_text())["environment"] == environment_fingerprint()
