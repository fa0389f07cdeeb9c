"""RACE on a user's own run: a notebook that does not use our CellConfig (nbs/experiments/own_run.ipynb: a Qwen2.5-format toy
policy, its own dataset columns, reward and evaluation) through `race pilot` and `race grid run` + `race diagnose`."""
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from race_nb.core import project_root
from race_nb.grid import GridError, aggregate, grid_status, load_grid, run_grid

RACE = str(Path(sys.executable).with_name("race"))
OWN = project_root() / "nbs" / "experiments" / "own_run.ipynb"


def variant(tmp_path, name, old, new):
    "The own-run notebook with one edit (a broken template)."
    text = OWN.read_text()
    assert old in text, old
    p = tmp_path / f"{name}.ipynb"
    p.write_text(text.replace(old, new))
    return p


def test_race_pilot_on_a_user_notebook(tmp_path):
    "race pilot: every cell's ledger equals FlopCounterMode within 1%, and a call or an abstention is printed with the pilot's cost."
    res = subprocess.run([RACE, "pilot", str(OWN), "--budget", "4e9", "--fraction", "0.25", "--arms", "n4-m4", "n4-m4-mu2",
                          "--seeds", "1001", "1002", "--set", "completion_tokens=8", "--flop-check", "--runs", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    cells = aggregate(tmp_path / "pilot-own_run")
    assert len(cells) == 4 and (cells.status == "done").all(), cells[["arm", "seed", "status", "error"]]
    ratio = cells.flops_total / cells.flopcounter_total
    assert ratio.between(0.99, 1.01).all(), ratio
    assert (cells.flops_total >= cells.budget).all() and {"digit_share", "counts"} <= set(cells.columns)
    for target in ("digit_share", "counts"):
        line = next(l for l in res.stdout.splitlines() if l.strip().startswith(target))
        assert any(c in line for c in ("high-update", "low-update", "abstain")), line
    assert "of the full budget 4e+09" in res.stdout and "GRPOConfig(num_generations=4" in res.stdout
    assert "ledger / FlopCounterMode over 4 cells" in res.stdout
    # the grid machinery works unchanged on it: status, diagnose
    st = subprocess.run([RACE, "grid", "status", str(tmp_path / "pilot-own_run")], capture_output=True, text=True)
    assert st.returncode == 0 and "done    4" in st.stdout.replace("done   4", "done    4"), st.stdout
    dg = subprocess.run([RACE, "diagnose", str(tmp_path / "pilot-own_run")], capture_output=True, text=True)
    assert dg.returncode == 0 and "digit_share" in dg.stdout, dg.stdout + dg.stderr
    rep = subprocess.run([RACE, "report", str(tmp_path / "pilot-own_run"), "--out", str(tmp_path / "site"), "--renderer", "fallback"],
                         capture_output=True, text=True, timeout=600)
    assert rep.returncode == 0 and "6 pages" in rep.stdout, rep.stdout + rep.stderr  # the study's three, the grid's own three (USER_PAGES)
    assert "digit_share" in (tmp_path / "site" / "grid" / "race.html").read_text() and "your own notebook" in (tmp_path / "site" / "grid" / "index.html").read_text()
    print(res.stdout)


def test_broken_templates_are_refused_before_anything_runs(tmp_path):
    no_finish = variant(tmp_path, "nofinish", "metrics = finish_run(trainer", "metrics = print(trainer")
    no_arm = variant(tmp_path, "noarm", '"mu: int = 1\\n",', '')
    for tpl, msg in ((no_finish, "never calls finish_run"), (no_arm, "lacks mu")):
        g = tmp_path / f"{tpl.stem}.yaml"
        g.write_text(f"name: {tpl.stem}\ntemplate: {tpl.name}\naxes:\n  arm: [n4-m4]\nbudgets: [1.0e9]\nseeds: [0]\n")
        with pytest.raises(GridError, match=msg): load_grid(g)
        res = subprocess.run([RACE, "pilot", str(tpl), "--budget", "4e9", "--runs", str(tmp_path / "runs")], capture_output=True, text=True)
        assert res.returncode == 1 and msg in res.stderr, res.stderr
    assert not (tmp_path / "runs").exists()
    g = tmp_path / "bad-param.yaml"
    g.write_text(f"name: badp\ntemplate: {OWN}\nfixed: {{temperature: 0.7}}\naxes:\n  arm: [n4-m4]\nbudgets: [1.0e9]\nseeds: [0]\n")
    with pytest.raises(GridError, match="fixed.temperature: unknown parameter; valid: arm, n, m, mu, beta, learning_rate"): load_grid(g)


def test_failing_and_silent_templates_are_failed_cells_and_the_rest_go_on(tmp_path):
    "A cell that stops before its budget, or ends without metrics, is recorded failed with the reason; the other cells finish."
    tpl = variant(tmp_path, "short", "max_steps=100_000", "max_steps=(1 if mu == 2 else 100_000)")  # mu = 2: stops before its budget
    tpl.write_text(tpl.read_text().replace("metrics = finish_run(trainer", "metrics = dict.fromkeys(('digit_share', 'counts', 'rho', "
                                           "'steps', 'flops_total', 'budget'), 0) if beta > 0 else finish_run(trainer")  # beta > 0: no metrics
                   .replace("GRPOConfig(output_dir=str(out / \\\"trl\\\"), seed=seed,", "GRPOConfig(output_dir=str(out / \\\"trl\\\"), seed=(0 if n == 8 else seed),"))
    assert "seed=(0 if n == 8" in tpl.read_text()  # n = 8: ignores its seed (issue 40: its seeds would be copies of one run)
    g = tmp_path / "broken.yaml"
    g.write_text(f"name: broken\ntemplate: {tpl.name}\nfixed: {{completion_tokens: 8}}\naxes:\n  arm: [n4-m4, n4-m4-mu2, n4-m4-b0.04, n8-m4]\n"
                 "budgets: [1.0e9]\nseeds: [1]\n")
    st = grid_status(run_grid(g, runs_root=tmp_path / "runs", workers=2, min_cycles=2)).set_index("arm")
    assert st.status.to_dict() == {"n4-m4": "done", "n4-m4-mu2": "failed", "n4-m4-b0.04": "failed", "n8-m4": "failed"}, st
    for arm, why in (("n4-m4-mu2", "raise max_steps"), ("n4-m4-b0.04", "without a valid metrics.json"),
                     ("n8-m4", "the trainer's seed=0, but the cell's seed is 1: pass seed=seed to GRPOConfig")):
        assert why in (tmp_path / "runs" / "broken" / st.loc[arm, "cell"] / "status.json").read_text(), arm


def test_user_notebook_cells_checkpoint_and_resume_after_kill9(tmp_path):
    "A user's notebook in a grid checkpoints through LedgerGRPOTrainer (the grid's checkpoint block) and resumes after kill -9, ending as an uninterrupted run."
    import os, time
    from test_resume import LEDGER_COLS, kill_at_checkpoint, newest_checkpoint
    text = (f"name: own-ck\ntemplate: {OWN}\nfixed: {{completion_tokens: 8}}\naxes:\n  arm: [n4-m4]\nbudgets: [1.0e10]\nseeds: [0]\n"
            "checkpoint: {steps: 2}\n")
    (tmp_path / "g.yaml").write_text(text)
    ref = run_grid(tmp_path / "g.yaml", runs_root=tmp_path / "ref", workers=1)
    root = tmp_path / "runs" / "own-ck"
    from conftest import own_kernel_server
    with own_kernel_server():  # the killed runner's own server, whose kernel dies with it (the reference and the rerun share the session's)
        seen = kill_at_checkpoint([RACE, "grid", "run", str(tmp_path / "g.yaml"), "--runs", str(tmp_path / "runs"), "--workers", "1"], root, 4)
    assert seen is not None, "the cell finished before a checkpoint at step 4"
    (cell,) = [d for d in root.iterdir() if (d / "params.yaml").exists()]
    at_kill = newest_checkpoint((cell, "trl/checkpoint-*"))
    time.sleep(2)  # the orphaned kernel dies with its parent
    run_grid(tmp_path / "g.yaml", runs_root=tmp_path / "runs", workers=1)
    assert "RACE_CELL_CHECKPOINT" not in os.environ  # the runner's environment is left as it was (in-process cells)
    (rcell,) = [d for d in (ref).iterdir() if (d / "params.yaml").exists()]
    m, mr = (json.loads((c / "metrics.json").read_text()) for c in (cell, rcell))
    assert m["resumed_from"] == [at_kill] and mr["resumed_from"] == []
    for k in ("digit_share", "counts", "steps", "flops_total", "flops_search", "flops_learning", "rho"): assert m[k] == mr[k], (k, m[k], mr[k])
    pd.testing.assert_frame_equal(pd.read_parquet(cell / "ledger.parquet")[LEDGER_COLS], pd.read_parquet(rcell / "ledger.parquet")[LEDGER_COLS])
    assert not list((cell / "trl").glob("checkpoint-*"))


def test_a_pilot_that_buys_too_few_steps_is_refused_after_one_cell(tmp_path):
    "Issue 37: `race pilot my_run.ipynb --budget 2e9` bought one optimizer step per cell and still recommended; now the first cell "
    "measures what a pilot cell buys and the pilot stops there, saying which fraction or budget would reach the minimum."
    res = subprocess.run([RACE, "pilot", str(OWN), "--budget", "2e9", "--fraction", "0.1", "--set", "completion_tokens=8",
                          "--runs", str(tmp_path)], capture_output=True, text=True, timeout=900)
    assert res.returncode == 1, res.stdout[-2000:] + res.stderr[-2000:]
    err = res.stderr.strip().splitlines()[-1]
    assert "optimizer step(s); a call needs 4+" in err and "Raise --fraction to about" in err, err
    assert len(aggregate(tmp_path / "pilot-own_run")) == 1  # one probe cell ran, nothing more
    print(err)


def test_an_edited_notebook_runs_again_and_cells_that_score_other_prompts_are_refused(tmp_path):
    "Issue 40: a template's content is part of its cells' identity (the old cells set aside, the edited notebook's run); cells of one grid "
    "that scored different prompts are refused by the call, not paired by position."
    nb = tmp_path / "mine.ipynb"
    nb.write_text(OWN.read_text())
    g = tmp_path / "g.yaml"
    g.write_text("name: mine\ntemplate: mine.ipynb\nfixed: {completion_tokens: 8}\naxes:\n  arm: [n4-m4]\nbudgets: [1.0e9]\nseeds: [1, 2]\n")
    root = run_grid(g, runs_root=tmp_path / "runs", workers=2, min_cycles=2)
    first = set(aggregate(root).cell)
    old = 'held_out = rows[32:]'
    assert old in nb.read_text()
    nb.write_text(nb.read_text().replace(old, "held_out = rows[32:] if seed == 1 else rows[33:]"))  # seed 2 scores one prompt fewer
    res = subprocess.run([RACE, "grid", "run", str(g), "--runs", str(tmp_path / "runs"), "--workers", "2", "--min-cycles", "2"],
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and "mine.ipynb changed since 2 cell(s) ran" in res.stdout, res.stdout[-2000:] + res.stderr[-2000:]
    cells = aggregate(root)
    assert (cells.status == "done").all() and len(cells) == 2 and not set(cells.cell) & first, cells
    assert {p.name for p in (root / "_superseded").iterdir()} == first
    dg = subprocess.run([RACE, "diagnose", str(root)], capture_output=True, text=True)
    assert dg.returncode == 1 and "1 of 2 cells scored other prompts than the rest" in dg.stderr, dg.stdout + dg.stderr
    print(dg.stderr.strip().splitlines()[-1])


def test_the_chapters_printed_command_runs_the_same_pilot(tmp_path):
    "Issues 40, 53: 10_own_run prints `pilot_command(...)` for its `run_pilot(...)`; that command plans the same cells (same ids): the frozen rule's design, two arms around the notebook's own at 1/8."
    from race_nb.pilot import PILOT_FRACTION, pilot_command, pilot_plan
    pilot = dict(budget=1e10, params=dict(completion_tokens=8), runs_root=tmp_path)  # as the chapter: the defaults
    ours = pilot_plan(OWN, **pilot)
    assert sorted(ours.arm.unique()) == ["n4-m4-mu2", "n8-m4"], ours  # around own_run's n = m = 4, mu = 1; the own arm is not run
    assert len(ours) == 6 and (ours.budget == 1e10 * PILOT_FRACTION).all(), ours
    cmd = pilot_command(OWN.relative_to(project_root()), **pilot).split()
    assert cmd[:2] == ["race", "pilot"]
    res = subprocess.run([RACE, *cmd[1:], "--plan"], capture_output=True, text=True, cwd=project_root())
    assert res.returncode == 0, res.stderr
    assert sorted(ours.cell) == sorted(l.split()[0] for l in res.stdout.splitlines()[1:]), res.stdout
    (tmp_path / "pilot-own_run.yaml").write_text((tmp_path / "pilot-own_run.yaml").read_text().replace("n8-m4", "n16-m4"))  # the user edits it
    res = subprocess.run([RACE, *cmd[1:], "--plan"], capture_output=True, text=True, cwd=project_root())
    assert res.returncode == 1 and "was edited after race pilot wrote it" in res.stderr, res.stderr
