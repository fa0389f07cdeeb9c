"""Never the wrong thing, quietly (issue 66): each case run as a user would, through the real command line in a subprocess.
A Slurm run without Slurm refuses in one line and starts nothing; the preflight names every missing input, models and data
alike, at once, and the plan shows the same problems and exits non-zero; the plan refuses, as run does, a cell that buys
fewer cycles than the minimum."""
import os
import stat
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
RACE = str(Path(sys.executable).with_name("race"))
DEMO = ROOT / "grids" / "demo.yaml"


def _run(args, env=None, timeout=300):
    return subprocess.run([RACE, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout, cwd=ROOT)


def _script(folder: Path, name: str, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def test_slurm_executor_without_a_slurm_client_refuses_and_starts_nothing(tmp_path):
    res = _run(["grid", "run", str(DEMO), "--executor", "slurm", "--runs", str(tmp_path / "runs")],
               env={"PATH": str(Path(sys.executable).parent)})  # the venv's bin: race and python, no Slurm client
    assert res.returncode != 0 and "no `sbatch` on PATH" in res.stderr and "--cluster local" in res.stderr, res.stdout + res.stderr
    assert "submitted" not in res.stdout and not (tmp_path / "runs").exists()
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr, res.stderr


def test_slurm_executor_with_no_controller_answering_refuses(tmp_path):
    fake = tmp_path / "bin"; fake.mkdir()
    _script(fake, "sbatch", "exit 1")
    _script(fake, "scontrol", "echo 'Slurmctld(primary) at ctl is DOWN'; exit 1")
    res = _run(["grid", "run", str(DEMO), "--executor", "slurm", "--runs", str(tmp_path / "runs")],
               env={"PATH": f"{fake}:{Path(sys.executable).parent}"})
    assert res.returncode != 0 and "no Slurm controller answers" in res.stderr and "is DOWN" in res.stderr, res.stdout + res.stderr
    assert not (tmp_path / "runs").exists()


def test_the_preflight_names_every_missing_input_at_once(tmp_path):
    "Two missing datasets and a missing model folder: one message names all three (grid key and path), before any cell; the "
    "plan prints the same problems and exits non-zero."
    grid = tmp_path / "missing.yaml"
    grid.write_text(f"""name: missing
fixed: {{train_data: "polaris:train", eval_id: "gsm8k:test", eval_ood: "math500:test", data_dir: "{tmp_path / 'nodata'}",
        max_completion_length: 32, prompts_per_step: 4,
        judge_settings: {{backend: hf, path: "{tmp_path / 'no-judge'}"}}}}
axes: {{model: [tiny-s], reward: [sparse], arm: [n8-m8]}}
budgets: [1.0e11]
seeds: [0]
""")
    (tmp_path / "nodata").mkdir()
    res = _run(["grid", "run", str(grid), "--runs", str(tmp_path / "runs")])
    out = res.stdout + res.stderr
    assert res.returncode != 0 and "4 inputs are missing or do not load; nothing was run" in out, out[-3000:]
    for want in ("fixed.judge_settings.path: the judge cannot be loaded from", "fixed.train_data: polaris:train: no polaris files",
                 "fixed.eval_id: gsm8k:test: gsm8k test split not found", "fixed.eval_ood: math500:test: math500 test split not found"):
        assert want in out, (want, out[-3000:])
    assert not (tmp_path / "runs" / "missing").exists()
    plan = _run(["grid", "plan", str(grid)])
    assert plan.returncode == 1 and "race grid run would refuse this grid" in plan.stdout and "no polaris files" in plan.stdout, plan.stdout[-2000:]


def test_plan_refuses_a_budget_that_buys_too_few_cycles(tmp_path):
    grid = tmp_path / "tiny-budget.yaml"
    grid.write_text("name: tinybudget\naxes: {model: [tiny-s], reward: [sparse], arm: [n8-m8]}\nbudgets: [1.0e8]\nseeds: [0]\n")
    plan = _run(["grid", "plan", str(grid)])
    assert plan.returncode == 1 and "buy fewer than 5 generation cycles" in plan.stdout and "raise their budgets" in plan.stdout, plan.stdout[-2000:]
    assert _run(["grid", "plan", str(grid), "--min-cycles", "0"]).returncode == 0
    run = _run(["grid", "run", str(grid), "--runs", str(tmp_path / "runs")])
    assert run.returncode != 0 and "buy fewer than 5 generation cycles" in run.stderr and not (tmp_path / "runs").exists(), run.stderr


CTRL_C = """name: ctrlc
fixed: {n_eval: 10, eval_max_new_tokens: 64, prompts_per_step: 4, milestones: 0}
axes: {model: [tiny-s], arm: [n8-m8]}
budgets: [2.0e10]
seeds: [0, 1]
checkpoint: {steps: 2, minutes: null}
"""


def test_ctrl_c_stops_the_grid_in_one_line_and_the_rerun_resumes(tmp_path):
    "Ctrl-C on `race grid run`: one line (done and stopped counts, how to resume), exit 130, the stopped cells `interrupted`, "
    "no temporary folder left; the rerun says which cell resumes from which checkpoint, and finishes the grid."
    import re
    import signal
    import tempfile
    import time
    from conftest import own_kernel_server
    from race_nb.grid import grid_status
    grid, runs = tmp_path / "ctrlc.yaml", tmp_path / "runs"
    grid.write_text(CTRL_C)
    tmp = Path(tempfile.mkdtemp(prefix="rk", dir="/tmp"))  # the runner's TMPDIR (short: its kernel socket lives there)
    with own_kernel_server():  # the runner starts its own warm kernel server, as outside the tests
        proc = subprocess.Popen([RACE, "grid", "run", str(grid), "--runs", str(runs), "--workers", "2"], cwd=ROOT, text=True,
                                env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    root, deadline = runs / "ctrlc", time.time() + 300
    while time.time() < deadline and not list(root.glob("*/trl/checkpoint-*/ledger.parquet")): time.sleep(0.2)
    assert list(root.glob("*/trl/checkpoint-*/ledger.parquet")), "no cell checkpointed in time"
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the runner and its workers
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-3000:])
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(r"interrupted: (\d+) done, (\d+) stopped; `race grid run` again resumes them", last)
    assert m and "Traceback" not in err, err[-3000:]
    st = grid_status(root)
    assert int(m[2]) >= 1 and (st.status == "interrupted").sum() == int(m[2]) and set(st.status) <= {"done", "interrupted", "pending"}, st
    assert not list(tmp.glob("race_k*")), list(tmp.iterdir())  # the warm kernel server's socket folder is gone
    resumed = [d.name for d in root.iterdir() if list(d.glob("trl/checkpoint-*/ledger.parquet")) and not (d / "trained.json").exists()]
    res = subprocess.run([RACE, "grid", "run", str(grid), "--runs", str(runs), "--workers", "2"], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert res.returncode == 0 and (grid_status(root).status == "done").all(), res.stdout[-2000:] + res.stderr[-2000:]
    for c in resumed: assert re.search(rf"cell {c}: resuming from checkpoint \d+", res.stdout), (c, res.stdout[-2000:])
