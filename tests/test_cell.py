"""One GRPO cell: determinism, arm errors, budget errors, realised rho of the arm table."""
import json

import pytest

from race_nb.arm_flops import reward_model_flops
from race_nb.build import build_trainer
from race_nb.config import Arm, CellConfig

from helpers import TOY


from race_nb.cell import run_cell
from race_nb.arm_flops import arm_for_rho, policy_flops, predict_rho
from race_nb.config import ARMS

VOLATILE = ("train_seconds", "eval_seconds", "versions", "config")


def test_same_seed_same_metrics(tmp_path):
    cfg = CellConfig(budget=3e10, n_eval=10, prompts_per_step=4, eval_max_new_tokens=64)
    a, b = run_cell(cfg, tmp_path / "a"), run_cell(cfg, tmp_path / "b")
    strip = lambda m: {k: v for k, v in m.items() if k not in VOLATILE}
    assert strip(a) == strip(b)


def test_budget_too_small_names_the_minimum(tmp_path):
    with pytest.raises(ValueError, match=r"too small for one step of arm n8-m8 \(minimum [0-9.e+]+ FLOPs\)"):
        build_trainer(CellConfig(budget=1e6), tmp_path)


def test_an_impossible_arm_or_target_rho_is_refused():
    "m > n, n < 2 and a target rho outside (0, 1) are refused with what is wrong."
    with pytest.raises(ValueError, match="cannot exceed"):
        Arm("x", n=4, m=6)
    with pytest.raises(ValueError, match="n must be at least 2"):
        Arm("x", n=1, m=1)
    for bad in (0.0, 1.0, -0.2, 3):
        with pytest.raises(ValueError, match="strictly between 0 and 1"):
            arm_for_rho(bad)


def test_arm_table_spans_rho_and_prm_lowers_it():
    pf, prm = policy_flops("tiny-s"), reward_model_flops("prm")
    rule = {a: predict_rho(ARMS[a], pf) for a in ARMS}
    assert min(rule.values()) < 0.3 and max(rule.values()) > 0.85
    assert all(predict_rho(ARMS[a], pf, prm) < rule[a] for a in ARMS)


def test_fast_generation_is_the_same_run(tmp_path):
    "Same seed with trl's generate and with fast generation: the same ledger and the same rewards, and the fast path really ran."
    runs = {}
    for fast in (False, True):
        tr = build_trainer(CellConfig(budget=1e15, max_steps=4, prompts_per_step=4, arm="n8-m4", fast_generation=fast,
                                      compact_generation=False), tmp_path / str(fast))  # trl's draws: every row to the end
        assert (tr.fast_reason is None) == fast, tr.fast_reason
        tr.train()
        runs[fast] = (tr.ledger.to_frame()[["step", "phase", "flops"]].to_dict("records"),
                      [h["reward"] for h in tr.state.log_history if "reward" in h])
    assert runs[False][0] == runs[True][0]
    assert runs[False][1] == pytest.approx(runs[True][1], abs=1e-6)


def test_training_leaves_nothing_resident_before_evaluation(data_dir, tmp_path):
    "The trainer and the hf PRM it scored with are gone once train_cell returns; evaluation loads one scorer at a time and drops it."
    import gc, weakref
    from race_nb import build as bd, cell
    from race_nb.rewards import prm
    built, scorers = {}, []
    orig_build, orig_scorer = bd.build_trainer, prm.hf_scorer  # the cell looks its trainer up in race_nb.build
    def build(*a, **k):
        tr = orig_build(*a, **k); built["trainer"] = weakref.ref(tr); return tr
    def scorer(*a, **k):
        s = orig_scorer(*a, **k); scorers.append(weakref.ref(s.model)); return s
    bd.build_trainer, prm.hf_scorer = build, scorer
    try:
        cfg = CellConfig(**{**TOY, "reward": "prm", "reward_settings": dict(backend="hf", path="toy:qwen-prm", require_answer=False),
                            "prompts_per_step": 4, "n_eval": 4, "eval_max_new_tokens": 8, "budget": 6e10})  # 3+ cycles: what stays resident does not depend on how many (was 2e11)
        trained = cell.train_cell(cfg, tmp_path / "cell")
        gc.collect()
        assert built["trainer"]() is None and scorers and all(r() is None for r in scorers)
        assert not prm._HF_SCORERS
        n_train = len(scorers)
        cell.finish_cell(cfg, trained, tmp_path / "cell")
        gc.collect()
        assert len(scorers) > n_train and all(r() is None for r in scorers) and not prm._HF_SCORERS  # PRM and judge dropped after scoring
    finally:
        bd.build_trainer, prm.hf_scorer = orig_build, orig_scorer
    assert json.loads((tmp_path / "cell" / "metrics.json").read_text())["flops_reward"] > 0
