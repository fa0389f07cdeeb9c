"""Grids end to end through papermill: micro grid, crash and resume, failing cell, submitit, validation."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from race_nb.core import project_root
from race_nb.grid import GridError, aggregate, grid_status, load_grid, run_grid

RACE = str(Path(sys.executable).with_name("race"))
MICRO = """name: {name}
fixed: {{n_eval: 10, eval_max_new_tokens: 64, prompts_per_step: 4}}
axes:
  model: [tiny-s]
  arm: {arms}
budgets: {budgets}
seeds: {seeds}
"""


def micro(tmp_path, name, budgets="[3.0e10]", seeds="[0, 1]", arms="[n8-m8, n8-m4]"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(MICRO.format(name=name, budgets=budgets, seeds=seeds, arms=arms))
    return p


def done_lines(cell: Path) -> int:
    return sum(l.split()[0] in ("done", "recovered") for l in (cell / "attempts.log").read_text().splitlines())


def test_micro_grid_runs_and_aggregates(tmp_path, monkeypatch):
    t0 = time.time()
    monkeypatch.chdir(tmp_path)
    root = run_grid(micro(tmp_path, "micro"), runs_root="runs", workers=2)  # a relative runs root, as `race demo` uses
    df = aggregate(root)
    assert (root / "results.parquet").exists() and len(pd.read_parquet(root / "results.parquet")) == 4
    assert (df.status == "done").all(), df[["cell", "status", "error"]]
    assert df.rho.between(0.05, 0.95).all() and (df.flops_total >= df.budget).all()
    for cell in root.iterdir():
        if cell.is_dir():
            assert {"params.yaml", "out.ipynb", "metrics.json", "ledger.parquet", "status.json"} <= {p.name for p in cell.iterdir()}
    # finished cells are never run again
    run_grid(micro(tmp_path, "micro"), runs_root=tmp_path / "runs", workers=2, min_cycles=0)
    assert all(done_lines(c) == 1 for c in root.iterdir() if c.is_dir())
    print(f"micro grid: {time.time() - t0:.1f} s")


def test_sigkill_mid_grid_then_resume(tmp_path):
    grid, runs = micro(tmp_path, "crash"), tmp_path / "runs"
    proc = subprocess.Popen([RACE, "grid", "run", str(grid), "--runs", str(runs), "--workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = runs / "crash"
    deadline = time.time() + 240
    while time.time() < deadline:  # kill once a cell is done and others are still to do
        st = grid_status(root) if root.exists() and any(root.iterdir()) else None
        if st is not None and (st.status == "done").sum() >= 1 and (st.status != "done").sum() >= 1: break
        time.sleep(0.5)
    proc.send_signal(signal.SIGKILL); proc.wait()
    before = grid_status(root)
    assert (before.status != "done").any(), "the grid finished before it could be killed"
    # a half-written result never counts: corrupt one unfinished cell's metrics
    victim = root / before[before.status != "done"].cell.iloc[0]
    (victim / "metrics.json").write_text('{"pass1_id": 0.')
    deadline = time.time() + 60  # orphaned kernels notice their parent died and release the cells' locks (no fixed wait)
    while "running" in set((dead := grid_status(root)).status) and time.time() < deadline: time.sleep(0.2)
    assert "running" not in set(dead.status)  # no runner holds a lock now: what was running is shown as stale, not running
    assert (dead.status == "stale").sum() == before.status.isin(["running", "stale"]).sum()
    res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(runs), "--workers", "2"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    st = grid_status(root)
    assert len(st) == 4 and (st.status == "done").all()
    for c in st.cell:
        assert done_lines(root / c) == 1, (root / c / "attempts.log").read_text()
        json.loads((root / c / "metrics.json").read_text())


def test_failing_cell_is_recorded_and_others_finish(tmp_path):
    root = run_grid(micro(tmp_path, "fail", budgets="[1.0e6, 3.0e10]", seeds="[0]"), runs_root=tmp_path / "runs", workers=2, min_cycles=0)
    st = grid_status(root)
    assert sorted(st.status) == ["done", "done", "failed", "failed"]
    failed = st[st.status == "failed"]
    assert (failed.budget == 1e6).all()
    rec = json.loads((root / failed.cell.iloc[0] / "status.json").read_text())
    assert "too small for one step" in rec["traceback"] + rec.get("evalue", "") and rec["ename"] == "ValueError"
    df = aggregate(root)
    assert df[df.status == "failed"].pass1_id.isna().all()  # failed, not zeros
    # failed cells are retried only when asked
    run_grid(micro(tmp_path, "fail", budgets="[1.0e6, 3.0e10]", seeds="[0]"), runs_root=tmp_path / "runs", workers=2, min_cycles=0)
    assert sum(l.startswith("start") for l in (root / failed.cell.iloc[0] / "attempts.log").read_text().splitlines()) == 1


def test_submitit_local_executor(tmp_path):
    root = run_grid(micro(tmp_path, "slurm", seeds="[0]", arms="[n8-m8]"), runs_root=tmp_path / "runs", executor="slurm", cluster="local",
                    resources={"time": 20})
    assert (grid_status(root).status == "done").all()
    assert (root / "_submitit").is_dir()


@pytest.mark.parametrize("text,msg", [
    ("name: x\naxes: {model: [tiny-s}\nbudgets: [1e10]\nseeds: [0]\n", "malformed YAML"),
    ("name: x\naxes:\n  model: [tiny-s]\nbudget: [1e10]\nseeds: [0]\n", ":4: budget: unknown key"),
    ("name: x\naxes:\n  model: [tiny-xl]\nbudgets: [1e10]\nseeds: [0]\n", "unknown model 'tiny-xl'"),
    ("name: x\naxes:\n  arm: [n99]\nbudgets: [1e10]\nseeds: [0]\n", "unknown arm 'n99'"),
    ("name: x\naxes:\n  model: [tiny-s]\nbudgets: [-1]\nseeds: [0]\n", "budgets must be positive"),
])
def test_bad_grid_fails_before_anything_is_written(tmp_path, text, msg):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(GridError, match=msg):
        load_grid(p)
    res = subprocess.run([RACE, "grid", "run", str(p), "--runs", str(tmp_path / "runs")], capture_output=True, text=True)
    assert res.returncode == 1 and msg.split(":")[-1].strip() in res.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name,n", [("demo", 12), ("tiny", 120), ("paper", 144), ("validation", 8), ("tiny-pilot", 60),
                                    ("race-pilot", 24), ("race-full", 72), ("size", 36),
                                    ("race-regimes-pilot", 48), ("race-regimes-full", 72)])
def test_shipped_grids_validate(name, n):
    g = load_grid(project_root() / "grids" / f"{name}.yaml")
    assert len(g["cells"]) == n and len({c["id"] for c in g["cells"]}) == n


def test_tiny_pilot_is_a_cheap_pilot_of_tiny():
    "The shipped RACE pilot covers every configuration and arm of the tiny grid for at most 15% of its FLOPs."
    pilot, full = (load_grid(project_root() / "grids" / f"{n}.yaml") for n in ("tiny-pilot", "tiny"))
    key = lambda c: (c["params"]["model"], c["params"]["reward"], c["params"]["arm"])
    assert {key(c) for c in pilot["cells"]} == {key(c) for c in full["cells"]}
    share = sum(c["params"]["budget"] for c in pilot["cells"]) / sum(c["params"]["budget"] for c in full["cells"])
    assert share <= 0.15, share


def test_race_validation_pilot_is_independent_and_cheap():
    "The validation pilot: the full grid's configurations, its extreme arms, seeds of its own, at most 15% of the FLOPs."
    pilot, full = (load_grid(project_root() / "grids" / f"{n}.yaml") for n in ("race-pilot", "race-full"))
    conf = lambda c: (c["params"]["model"], c["params"]["reward"])
    assert {conf(c) for c in pilot["cells"]} == {conf(c) for c in full["cells"]}
    assert not {c["params"]["seed"] for c in pilot["cells"]} & {c["params"]["seed"] for c in full["cells"]}
    share = sum(c["params"]["budget"] for c in pilot["cells"]) / sum(c["params"]["budget"] for c in full["cells"])
    assert share <= 0.15, share
    assert all(c["params"]["n_eval"] >= 1000 for c in pilot["cells"] + full["cells"])
