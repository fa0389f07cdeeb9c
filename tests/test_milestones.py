"""Learning curves inside a cell (issue 36): a cell's milestone at B/4 is a B/4 run. Cells train at a constant learning rate with the
budget as the only stop, so the first quarter of a budget-B cell is a B/4 cell of the same seed: its greedy pass@1 at the B/4
milestone must equal a separate B/4 cell's, prompt by prompt (same machine), and evaluating along the way must not change training."""

import pandas as pd

from race_nb.config import CellConfig
from race_nb.cell import run_cell
from race_nb.eval import read_milestones
from race_nb.ledger import FlopsLedger


def test_milestone_at_a_quarter_equals_a_quarter_budget_cell(tmp_path):
    base = dict(model="tiny-s", n_eval=32, seed=3, prompts_per_step=4)
    full = run_cell(CellConfig(budget=4e10, **base), tmp_path / "full")
    quarter = run_cell(CellConfig(budget=1e10, milestones=0, **base), tmp_path / "quarter")
    plain = run_cell(CellConfig(budget=4e10, milestones=0, **base), tmp_path / "plain")
    ms = read_milestones(tmp_path / "full")
    assert sorted(ms.milestone.unique()) == [i / 8 for i in range(1, 8)] and (ms.flops.diff().fillna(0) >= 0).all(), ms.milestone.unique()
    q = ms[ms.milestone == 0.25]
    assert q.step.iloc[0] == quarter["steps"] and q.flops.iloc[0] == quarter["flops_total"], (q.step.iloc[0], quarter["steps"])
    per = pd.read_parquet(tmp_path / "quarter" / "per_prompt.parquet")
    for t in ("pass1_id", "pass1_ood"):
        a = q[q.target == t].sort_values("prompt").value.to_numpy()
        b = per[per.target == t].sort_values("prompt").value.to_numpy()[:len(a)]
        assert len(a) == 32 and (a == b).all(), (t, a, b)
    # evaluating along the way changes nothing of the training run: same steps, FLOPs and final targets as without milestones
    for k in ("steps", "flops_total", "pass1_id", "pass1_ood", "native_reward"):
        assert full[k] == plain[k], (k, full[k], plain[k])
    ev = FlopsLedger.load(tmp_path / "full" / "ledger.parquet").to_frame()
    assert ev[ev.phase.str.startswith("milestone")].flops.sum() > 0 and (ev[ev.phase.str.startswith("milestone")].component == "eval").all()
    assert full["flops_eval"] > plain["flops_eval"]  # the milestones' cost is evaluation's, outside the budget
