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
fixed: {{n_eval: 10, eval_max_new_tokens: 64, prompts_per_step: 4, milestones: 0}}
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


@pytest.mark.xdist_group("report")  # micro_runs: one pytest-xdist worker builds it, for these tests and test_report / test_site
def test_micro_grid_runs_and_aggregates(micro_runs):
    "conftest's micro grid (run with a relative runs root, as `race demo` does): results, files and tracked runs of its done cells."
    root = micro_runs
    df = aggregate(root)
    assert (root / "results.parquet").exists() and len(pd.read_parquet(root / "results.parquet")) == 8
    done = df[df.budget == 3.0e10]
    assert len(done) == 4 and (done.status == "done").all(), df[["cell", "status", "error"]]
    tracked_runs_equal_log_histories(root, done.cell)
    assert done.rho.between(0.05, 0.95).all() and (done.flops_total >= done.budget).all()
    for cell in done.cell:
        assert {"params.yaml", "out.ipynb", "metrics.json", "ledger.parquet", "status.json"} <= {p.name for p in (root / cell).iterdir()}


def watch_in_tmux(root):
    "`race grid watch ROOT` in a detached tmux session; returns a function reading the screen (stop=True ends it), or None without tmux."
    import shutil
    if not shutil.which("tmux"):
        if os.environ.get("RACE_REQUIRE_TMUX") == "1": pytest.fail("tmux is required here (RACE_REQUIRE_TMUX=1)")
        return None
    name = f"watch{os.getpid()}"
    subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "220", "-y", "50", f"{RACE} grid watch {root} --interval 0.5"], check=True)
    def screen(stop=False):
        if stop: subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True); return ""
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", name], capture_output=True, text=True).stdout
    return screen


def tracked_runs_equal_log_histories(root, cells):
    "Issue 39: each cell one TensorBoard run and one trackio run (offline, under the runs folder), named by the cell id, in the grid's "
    "project, with the cell's parameters as config; every flops/* key of the log history read back by each tracker's own reader, step by step."
    import importlib
    from test_resume import tensorboard_scalars
    os.environ["TRACKIO_DIR"] = str(root / "_tracking" / "trackio")  # where the cells wrote; trackio reads its folder at import
    import trackio.utils, trackio.sqlite_storage
    importlib.reload(trackio.utils); importlib.reload(trackio.sqlite_storage)
    from trackio.sqlite_storage import SQLiteStorage
    first = lambda pairs: list(dict((s, v) for s, v in reversed(pairs)).items())[::-1]  # one value per step (trl's summary repeats the last)
    runs = SQLiteStorage.get_runs(root.name)
    assert sorted(r if isinstance(r, str) else r["name"] for r in runs) == sorted(cells), runs
    for c in cells:  # trackio prints how to open its dashboard only where it does not launch one itself (a web server per cell)
        assert "View dashboard by running in your terminal" in (root / c / "cell.log").read_text(), c
        hist = [r for r in json.loads((root / c / "log_history.json").read_text()) if "flops/search" in r]
        tb = tensorboard_scalars(root / "_tracking" / "tensorboard" / c)
        logs = [r for r in SQLiteStorage.get_logs(root.name, c) if "train/flops/search" in r]
        keys = [k for k in hist[0] if k.startswith("flops/")]
        assert len(keys) >= 6, keys
        for k in keys:
            want = first([(r["step"], r[k]) for r in hist if k in r])
            for name, got in (("tensorboard", first(tb["train/" + k])), ("trackio", first([(r["train/global_step"], r["train/" + k]) for r in logs if "train/" + k in r]))):
                assert [s for s, _ in got] == [s for s, _ in want], (name, c, k, got, want)
                assert all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, want)), (name, c, k)
        assert SQLiteStorage.get_run_config(root.name, c)["race/arm"] in ("n8-m8", "n8-m4")


def test_sigkill_mid_grid_then_resume(tmp_path):
    from conftest import own_kernel_server
    grid, runs = micro(tmp_path, "crash", budgets="[1.5e10]", seeds="[0, 1, 2]", arms="[n8-m8]"), tmp_path / "runs"  # 3 cells on 2 workers: one still to start at the kill
    with own_kernel_server():  # the killed runner's own server: its kernels die with it, as outside the tests (the rerun shares the session's)
        proc = subprocess.Popen([RACE, "grid", "run", str(grid), "--runs", str(runs), "--workers", "2"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    root = runs / "crash"
    deadline = time.time() + 240
    while time.time() < deadline and not (root.exists() and any(root.iterdir())): time.sleep(0.2)
    tmux = watch_in_tmux(root)  # issue 39: the live view, in a real terminal, while the grid runs
    screens = []
    while time.time() < deadline:  # kill once a cell is done and others are still to do
        st = grid_status(root) if root.exists() and any(root.iterdir()) else None
        if tmux and st is not None and (st.status == "running").any(): screens.append(tmux())
        if st is not None and (st.status == "done").sum() >= 1 and (st.status != "done").sum() >= 1: break
        time.sleep(0.5)
    if tmux: screens.append(tmux()); tmux(stop=True)
    proc.send_signal(signal.SIGKILL); proc.wait()
    if tmux:  # rows read back from the terminal: the header's counts, a running cell with its budget share, steps, reward, rho, ETA
        rows = [l for scr in screens for l in scr.splitlines() if " running " in l and "%" in l]
        assert any(s.startswith("grid crash: 3 cells - done ") for scr in screens for s in scr.splitlines()), screens[-1]
        assert rows, "\n---\n".join(screens[-3:])
        cell, arm, seed, status, budget, steps, reward, rho, per, *eta = rows[-1].split()
        assert cell in set(grid_status(root).cell) and arm in ("n8-m8", "n8-m4") and budget.endswith("%") and int(steps) >= 1, rows[-1]
        assert 0 <= float(rho) <= 1 and float(per) > 0, rows[-1]
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
    assert len(st) == 3 and (st.status == "done").all()
    for c in st.cell:
        assert done_lines(root / c) == 1, (root / c / "attempts.log").read_text()
        json.loads((root / c / "metrics.json").read_text())


@pytest.mark.xdist_group("report")
def test_failing_cell_is_recorded_and_others_finish(micro_runs):
    root = micro_runs
    st = grid_status(root)
    assert sorted(st.status) == ["done"] * 4 + ["failed"] * 4
    failed = st[st.status == "failed"]
    assert (failed.budget == 1e6).all()
    rec = json.loads((root / failed.cell.iloc[0] / "status.json").read_text())
    assert "too small for one step" in rec["traceback"] + rec.get("evalue", "") and rec["ename"] == "ValueError"
    df = aggregate(root, write=False)
    assert df[df.status == "failed"].pass1_id.isna().all()  # failed, not zeros
    # finished cells are never run again, and failed cells are retried only when asked
    starts = lambda c: sum(l.startswith("start") for l in (root / c / "attempts.log").read_text().splitlines())
    run_grid(root.parent.parent / "micro.yaml", runs_root=root.parent, workers=2, min_cycles=0)
    assert all(done_lines(root / c) == 1 for c in st[st.status == "done"].cell)
    assert all(starts(c) == 1 for c in failed.cell)


def test_the_slurm_executor_runs_through_submitits_local_cluster(tmp_path):
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
                                    ("race-pilot", 24), ("race-full", 72), ("size", 72),
                                    ("race-regimes-pilot", 48), ("race-regimes-full", 72)])
def test_every_shipped_grid_loads_with_its_cell_count(name, n):
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


NO_FLOCK = """import errno, fcntl, os
def _no_flock(*a, **k):  # a cluster filesystem mounted without flock (Lustre: ENOSYS), in every process that starts here
    with open(os.environ["RACE_TEST_FLOCK_CALLS"], "a") as f: f.write(f"{os.getpid()}\\n")
    raise OSError(errno.ENOSYS, "Function not implemented")
fcntl.flock = _no_flock
"""


def test_grid_runs_where_flock_raises_enosys(tmp_path):
    "Issue 52: where fcntl.flock raises ENOSYS in every process (the runner, its kernels), the grid still runs to the end on the "
    "marker-file fallback, and its status reads back."
    from conftest import own_kernel_server
    site = tmp_path / "site"; site.mkdir()
    (site / "sitecustomize.py").write_text(NO_FLOCK)
    calls = tmp_path / "flock_calls"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
               RACE_TEST_FLOCK_CALLS=str(calls))
    grid = micro(tmp_path, "noflock", budgets="[1.5e10]", seeds="[0]", arms="[n8-m8]")
    with own_kernel_server():  # kernels started here import the sitecustomize too (a warm server forked before it would not)
        res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(tmp_path / "runs"), "--workers", "1"], capture_output=True,
                             text=True, timeout=600, env=env)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert calls.read_text().split(), "flock was never called"  # the runner met the ENOSYS on every cell lock it took
    st = subprocess.run([RACE, "grid", "status", str(tmp_path / "runs" / "noflock")], capture_output=True, text=True, env=env)
    assert st.returncode == 0 and "done" in st.stdout, st.stdout + st.stderr
    root = tmp_path / "runs" / "noflock"
    assert (grid_status(root).status == "done").all() and not list(root.glob("*/.lock.held"))  # released
