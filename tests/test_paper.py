"""The paper-scale path rehearsed on CPU: Qwen2.5-format toy checkpoints, hf PRM / proxy / judge back-ends, Polaris-format training data,
GSM8K / MATH-500 evaluation: every reward system through papermill, and the toy whole step against FlopCounterMode."""
import os, subprocess


from race_nb.core import project_root
from race_nb.build import whole_step_check
from race_nb.config import Arm

from helpers import RACE, TOY








def test_rehearsal_grid_runs_every_reward_system(data_dir, tmp_path):
    env = {**os.environ, "RACE_DATA_DIR": str(data_dir)}
    grid = project_root() / "grids" / "paper-rehearsal.yaml"
    plan = subprocess.run([RACE, "grid", "plan", str(grid)], capture_output=True, text=True, env=env)
    assert plan.returncode == 0, plan.stderr
    assert "generation cycles" in plan.stdout
    res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(tmp_path)],  # workers: one per core, or per GPU where CUDA is
                         capture_output=True, text=True, env=env, timeout=900)
    assert res.returncode == 0, res.stdout + res.stderr
    from race_nb.grid import aggregate
    df = aggregate(tmp_path / "paper-rehearsal")
    assert (df.status == "done").all(), df[["reward", "status", "error"]]
    assert set(df.reward) == {"sparse", "structured", "proxy_prm", "prm"}  # dense cannot score math text: refused
    model = df.set_index("reward")
    assert (model.loc[["prm", "proxy_prm"], "flops_reward"] > 0).all(), model.flops_reward   # the hf back-ends ran and were charged
    assert (model.loc[["sparse", "structured"], "flops_reward"] == 0).all()
    assert (df.steps >= 5).all() and (df.overshoot >= 0).all()
    for cell in df.cell:  # the judge score comes from the hf judge: a sigmoid of a random one-logit head, charged to eval
        from race_nb.ledger import FlopsLedger
        ev = FlopsLedger.load(tmp_path / "paper-rehearsal" / cell / "ledger.parquet").to_frame()
        assert ev[(ev.component == "eval") & (ev.phase == "judge")].flops.sum() > 0
    assert df.judge.between(0.01, 0.99).all(), df.judge


def test_toy_whole_step_matches_flopcountermode(data_dir):
    arm = Arm("check", n=6, m=4, mu=2)
    prm = dict(reward="prm", reward_settings=dict(backend="hf", path="toy:prm", attn_implementation="eager", require_answer=False),
               micro_batches=2, gradient_checkpointing=True)
    eager = whole_step_check(arm, cycles=2, **TOY, **prm)
    assert abs(eager["ratio"] - 1) < 0.01, eager
    assert eager["phases"]["prm"] > 0 and eager["phases"]["old_logprob"] > 0
    sdpa = whole_step_check(arm, cycles=2, **TOY, **prm, attn_implementation="sdpa")
    assert sdpa["ledger"] == eager["ledger"], (sdpa, eager)   # the ledger counts formulas, not attention kernels


























