"""A real Slurm: a one-node cluster on localhost (`.ci/slurm start`; CI starts it and sets RACE_REQUIRE_SLURM=1).

One grid through `race grid run --executor slurm`: the sbatch scripts submitit wrote carry the grid's resources; one cell is
requeued by hand (`scontrol requeue`, as a preemption) and resumes from its checkpoint; the other has a 2-minute time limit,
and once it trains (its first checkpoint is written) the test lowers the job's limit (`scontrol update TimeLimit=`, as an
administrator can) so that Slurm's warning signal comes within seconds whatever the machine's speed; the warning makes the
cell checkpoint and requeue itself, and the test gives the requeued job a limit it fits in. Both end equal to an
uninterrupted local run of the same cells. The test releases requeued jobs from Slurm's 2-minute requeue hold (`scontrol
update StartTime=now`) so that it takes minutes, not more. Skipped, with the reason, where no Slurm runs, except in CI."""
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm  # `make test` runs these after the others, alone: a Slurm job's cores are not the pytest worker's

from race_nb.grid import GridError, grid_status, parse_minutes, run_grid
from test_resume import same_run

RACE = str(Path(sys.executable).with_name("race"))
GRID = """name: slurm-real
fixed: {n_eval: 10, eval_max_new_tokens: 32, prompts_per_step: 4}
axes:
  model: [tiny-s]
  arm: [n8-m8-mu2]
budgets: [1.0e11, 5.4e11]
seeds: [0]
resources:
  cpus: 1
  mem: 3G
  time: 20
  partition: debug
  signal_delay: 60
  sbatch: {comment: race-nb-test}
  by:
    budget: {5.4e11: {time: 2}}
checkpoint: {steps: 4, minutes: null}
"""


def slurm_missing() -> str | None:
    "Why no Slurm can be used here (None: a node answers)."
    for tool in ("sbatch", "sinfo", "scontrol", "squeue"):
        if shutil.which(tool) is None: return f"{tool} is not installed (.ci/slurm install)"
    try: r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired: return "sinfo timed out: slurmctld is not answering (.ci/slurm start)"
    if r.returncode: return f"sinfo failed: {r.stderr.strip()[:200]} (.ci/slurm start)"
    if not {"idle", "mixed", "allocated"} & set(r.stdout.split()): return f"no usable node (sinfo: {r.stdout.strip() or 'none'})"
    return None


@pytest.fixture(scope="module")
def slurm():
    why = slurm_missing()
    if why and os.environ.get("RACE_REQUIRE_SLURM") == "1": pytest.fail(f"RACE_REQUIRE_SLURM=1 but no Slurm: {why}")
    if why: pytest.skip(f"no Slurm here: {why}")


def squeue() -> list[tuple[str, str, str]]:
    out = subprocess.run(["squeue", "-h", "-n", "race-cell", "-o", "%i %T %r"], capture_output=True, text=True).stdout
    return [tuple(l.split(maxsplit=2)) for l in out.splitlines() if l.strip()]


SMALL, BIG = 1.0e11, 5.4e11  # requeued by hand at checkpoint-8 of 56 steps; time-limited, 300 steps


def elapsed_seconds(job: str) -> float | None:
    "How long a running Slurm job has run (squeue's %M, a Slurm time: race_nb.grid.parse_minutes reads it), None when it is not running."
    out = subprocess.run(["squeue", "-h", "-j", job, "-t", "RUNNING", "-o", "%M"], capture_output=True, text=True).stdout.strip()
    return parse_minutes(out) * 60 if out else None


def newest_checkpoint(cell: Path) -> int:
    return max([int(p.name.split("-")[-1]) for p in (cell / "trl").glob("checkpoint-*") if (p / "ledger.parquet").exists()], default=-1)


@pytest.fixture(scope="module", autouse=True)
def own_kernel_servers():
    "Slurm jobs run as they would on a cluster: without the session's shared warm kernel server (conftest)."
    from conftest import own_kernel_server
    with own_kernel_server(): yield


def cells_by_budget(root: Path) -> dict:
    import yaml
    return {yaml.safe_load((d / "params.yaml").read_text())["budget"]: d for d in root.iterdir() if (d / "params.yaml").exists()}


def test_real_slurm_resources_requeue_and_time_limit(tmp_path, slurm):
    g = tmp_path / "slurm-real.yaml"
    g.write_text(GRID)
    # the reference runs each cell on one thread, as the Slurm cells do (cpus: 1): thread counts may change results on other CPUs
    ref = subprocess.Popen([RACE, "grid", "run", str(g), "--runs", str(tmp_path / "ref"), "--workers", str(os.cpu_count() or 1)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    log = open(tmp_path / "slurm-run.log", "w")
    run = subprocess.Popen([RACE, "grid", "run", str(g), "--executor", "slurm", "--runs", str(tmp_path / "runs")], stdout=log, stderr=log)
    root, requeued, limited, released, t0 = tmp_path / "runs" / "slurm-real", None, None, 0, time.time()
    while run.poll() is None and time.time() - t0 < 900:
        cells = cells_by_budget(root) if root.exists() else {}
        small, big = cells.get(SMALL), cells.get(BIG)
        if requeued is None and small is not None and newest_checkpoint(small) >= 8 and not (small / "trained.json").exists():
            job = json.loads((small / "status.json").read_text()).get("slurm_job")
            if job and subprocess.run(["scontrol", "requeue", job], capture_output=True).returncode == 0:
                requeued = (job, newest_checkpoint(small))
        if limited is None and big is not None and newest_checkpoint(big) >= 4 and not (big / "trained.json").exists():
            # the time-limited cell trains: lower its limit to the first whole minute at least 45 s away. Slurm sends the warning
            # (signal_delay: 60 s before the limit) at its next time-limit check, and the cell still has 45 s to checkpoint and requeue
            job = json.loads((big / "status.json").read_text()).get("slurm_job")
            if job and (el := elapsed_seconds(job)) is not None:
                minutes = max(1, math.ceil((el + 45) / 60))
                if subprocess.run(["scontrol", "update", f"JobId={job}", f"TimeLimit={minutes}"], capture_output=True).returncode == 0:
                    limited = (job, minutes, el)
        for jid, state, reason in squeue():  # skip Slurm's requeue hold (BeginTime about 2 minutes after a requeue)
            if state == "PENDING" and "BeginTime" in reason:
                fits = ["TimeLimit=20"] if limited and jid == limited[0] else []  # the resumed time-limited cell: the grid's 20 minutes
                released += subprocess.run(["scontrol", "update", f"JobId={jid}", "StartTime=now", *fits], capture_output=True).returncode == 0
        time.sleep(0.5)
    if run.poll() is None: run.kill(); pytest.fail(f"the Slurm grid did not finish in 15 min:\n{(tmp_path / 'slurm-run.log').read_text()[-3000:]}")
    assert ref.wait(timeout=600) == 0
    out = (tmp_path / "slurm-run.log").read_text()
    assert run.returncode == 0, out[-3000:]
    assert requeued is not None, "the short cell finished before it could be requeued"
    assert limited is not None, "the time-limited cell finished before its limit could be lowered"

    # the sbatch scripts carry the grid's resources: one job array per set of resources
    scripts = sorted((root / "_submitit").glob("*_submission.sh"))
    assert len(scripts) == 2, scripts
    for s in scripts:
        text = s.read_text()
        for line in ("--cpus-per-task=1", "--mem=3G", "--partition=debug", "--signal=USR2@60", "--comment=race-nb-test"):
            assert f"#SBATCH {line}\n" in text, (line, text)
        srun = next(l for l in text.splitlines() if l.startswith("srun "))
        assert "--cpus-per-task=1" in srun, srun  # the step gets the CPUs too (Slurm 22.05-23.02 would bind it to one)
    assert sorted(next(l for l in s.read_text().splitlines() if l.startswith("#SBATCH --time=")) for s in scripts) == \
        ["#SBATCH --time=2", "#SBATCH --time=20"]

    cells, ref_cells = cells_by_budget(root), cells_by_budget(tmp_path / "ref" / "slurm-real")
    st = grid_status(root)
    assert (st.status == "done").all(), st
    # requeued by hand: resumed from the checkpoint it had (or a later one written as SIGTERM arrived)
    small = json.loads((cells[SMALL] / "trained.json").read_text())
    assert len(small["resumed_from"]) == 1 and small["resumed_from"][0] >= requeued[1], (small, requeued)
    # the time limit: Slurm's warning made it checkpoint and requeue itself (submitit's checkpoint hook)
    big = json.loads((cells[BIG] / "trained.json").read_text())
    assert big["resumed_from"], big
    assert "requeued" in (cells[BIG] / "attempts.log").read_text()
    assert int(json.loads((cells[BIG] / "status.json").read_text())["slurm_restarts"]) >= 1
    for b in cells:  # the window a checkpoint has after the warning (signal_delay 60 less 20 s) reached every cell's trainer, which timed its steps
        t = json.loads((cells[b] / "trained.json").read_text())
        assert t["checkpoint_window_seconds"] == 40.0 and t["longest_wait_seconds"] is not None, t
    for b in cells: same_run(ref_cells[b], cells[b])  # metrics and every ledger event equal the uninterrupted runs
    print(f"requeued job {requeued[0]} at checkpoint-{requeued[1]} -> resumed from {small['resumed_from']}; "
          f"time-limited cell (limit lowered to {limited[1]} min after {limited[2]} s) resumed from {big['resumed_from']}; "
          f"released {released} requeue hold(s); {time.time() - t0:.0f} s")


def test_real_slurm_refuses_gpus_on_a_cpu_node_and_the_script_asks_for_them(tmp_path, slurm):
    "A GPU request reaches the sbatch script (--gpus-per-node); this node has none, so sbatch refuses it and the grid says so."
    g = tmp_path / "slurm-gpu.yaml"
    g.write_text(GRID.replace("name: slurm-real", "name: slurm-gpu"))
    with pytest.raises(GridError, match=r"the cluster refused 2 cell\(s\) asking for .*gpus=2") as e:
        run_grid(g, runs_root=tmp_path / "runs", executor="slurm", resources={"gpus": 2, "time": 30})
    (script,) = (tmp_path / "runs" / "slurm-gpu" / "_submitit").glob(".submission_file_*.sh")
    assert f"the sbatch script it refused: {script}" in str(e.value)
    text = script.read_text()
    assert "#SBATCH --gpus-per-node=2\n" in text and "#SBATCH --time=30\n" in text, text
    # a GPU type and a node feature (--gpus-per-node=TYPE:N, --constraint), then a site's own gres string instead of --gpus-per-node
    for name, res, want, absent in (("slurm-gputype", {"gpus": 1, "gpu_type": "h100", "constraint": "h100", "time": 30},
                                     ["#SBATCH --gpus-per-node=h100:1\n", "#SBATCH --constraint=h100\n"], None),
                                    ("slurm-gres", {"gpus": 1, "gres": "gpu:h100:1", "time": 30}, ["#SBATCH --gres=gpu:h100:1\n"], "--gpus-per-node")):
        g = tmp_path / f"{name}.yaml"
        g.write_text(GRID.replace("name: slurm-real", f"name: {name}"))
        with pytest.raises(GridError, match="the cluster refused 2 cell"):
            run_grid(g, runs_root=tmp_path / "runs", executor="slurm", resources=res)
        (script,) = (tmp_path / "runs" / name / "_submitit").glob(".submission_file_*.sh")
        text = script.read_text()
        assert all(w in text for w in want) and (absent is None or absent not in text), text
