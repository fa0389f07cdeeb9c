"""Checkpoints, resume and the two-stage cell on the local executor: kill -9 mid-training, a failed evaluation, a stop inside a generation cycle."""
import json, os, signal, subprocess, time
from pathlib import Path

import pandas as pd
import pytest

from race_nb.build import build_trainer
from race_nb.config import CellConfig
from race_nb.grid import grid_status, run_grid

from helpers import RACE, grid




pytestmark = pytest.mark.xdist_group('resume')  # its tests share an expensive fixture: one pytest-xdist worker runs them all

TARGETS = ("pass1_id", "pass1_ood", "native_reward", "judge")
LEDGER_COLS = ["step", "component", "phase", "tokens", "useful_tokens", "flops", "useful_flops"]  # all but wall-clock times




def only_cell(root: Path) -> Path:
    (cell,) = [d for d in root.iterdir() if d.is_dir() and (d / "params.yaml").exists()]
    return cell


def same_run(a: Path, b: Path):
    "Two cells' metrics and ledgers (every FLOP and token of every event) are equal."
    ma, mb = (json.loads((c / "metrics.json").read_text()) for c in (a, b))
    for k in (*TARGETS, "steps", "flops_total", "flops_search", "flops_learning", "flops_reward", "flops_eval", "rho"):
        assert ma[k] == mb[k], (k, ma[k], mb[k])
    la, lb = (pd.read_parquet(c / "ledger.parquet")[LEDGER_COLS] for c in (a, b))
    pd.testing.assert_frame_equal(la, lb)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    "One uninterrupted run of the cell the kill and the failed-evaluation tests interrupt (same parameters: the same cell id)."
    tmp = tmp_path_factory.mktemp("reference")
    return only_cell(run_grid(grid(tmp, "ck"), runs_root=tmp / "ref", workers=1))


def newest_checkpoint(cells_glob) -> int | None:
    "The highest step among the complete checkpoints (ledger written) matching a `trl/checkpoint-*` glob."
    base, pattern = cells_glob
    steps = [int(p.name.split("-")[-1]) for p in base.glob(pattern) if (p / "ledger.parquet").exists()]
    return max(steps, default=None)


def kill_at_checkpoint(cmd: list, root: Path, step: int, timeout: float = 300) -> int | None:
    "Start `cmd` in its own process group, SIGKILL the group once a complete checkpoint at `step` or later exists under root/*/trl/; return the step seen (None: it ended first)."
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    seen, deadline = None, time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if (s := newest_checkpoint((root, "*/trl/checkpoint-*"))) is not None and s >= step: seen = s; break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL); proc.wait()
    return seen


def test_kill9_mid_training_resumes_from_its_checkpoint(own_server, tmp_path, reference):
    "kill -9 of the runner mid-training; the rerun resumes from the newest checkpoint (at most one interval redone) and ends as an uninterrupted run."
    ref = reference
    g = grid(tmp_path, "ck")
    root = tmp_path / "runs" / "ck"
    seen = kill_at_checkpoint([RACE, "grid", "run", str(g), "--runs", str(tmp_path / "runs"), "--workers", "1", "--report-to", "tensorboard", "trackio"], root, 12)
    assert seen is not None, "training ended before a checkpoint at step 12"
    cell = only_cell(root)
    assert not (cell / "trained.json").exists(), "killed after training: nothing to resume"
    at_kill = newest_checkpoint((cell, "trl/checkpoint-*"))
    st = grid_status(root)
    deadline = time.time() + 60  # the orphaned kernel dies with its parent and releases the lock
    while (st := grid_status(root)).status.iloc[0] == "running" and time.time() < deadline: time.sleep(0.2)
    assert st.status.iloc[0] == "stale" and st.checkpoint.iloc[0] == at_kill
    run_grid(g, runs_root=tmp_path / "runs", workers=1, report_to=["tensorboard", "trackio"])
    rec = json.loads((cell / "trained.json").read_text())
    assert rec["resumed_from"] == [at_kill]  # the newest complete checkpoint: at most 4 steps (one interval) redone
    same_run(ref, cell)
    assert not (cell / "trl").exists()  # checkpoints are removed once the training stage is written
    # issue 39: one tracked run per cell (named by its id), its steps continuing after the resume, none repeated, equal to the log history
    (tb,) = list((root / "_tracking" / "tensorboard").iterdir())
    assert tb.name == cell.name and len(list(tb.glob("events.out.tfevents.*"))) == 2  # the killed attempt's file and the resumed one's
    logged = tensorboard_scalars(tb)
    hist = [r for r in json.loads((cell / "log_history.json").read_text()) if "flops/search" in r]
    keys = [k for k in hist[-1] if k.startswith("flops/")]
    assert len(keys) >= 6, keys
    for k in keys:
        want = [(r["step"], r[k]) for r in hist if k in r]
        got = logged.get(k) or logged["train/" + k]  # transformers writes training records under train/
        assert [s for s, _ in got] == [s for s, _ in want], (k, got, want)  # every step once, in order
        assert all(abs(a - b) <= 1e-6 * max(1.0, abs(b)) for (_, a), (_, b) in zip(got, want)), k
    steps = trackio_steps(root, cell.name)  # trackio continues the same run and logs each step once (no purge there: replays are skipped)
    once = lambda xs: xs[:-1] if len(xs) > 1 and xs[-1] == xs[-2] else xs  # trl's closing summary may repeat the last step
    assert once(steps) == once([r["step"] for r in hist]), (steps, [r["step"] for r in hist])
    print(f"killed with checkpoint-{at_kill} on disk; resumed from it; metrics and ledger equal the uninterrupted run's; "
          f"TensorBoard: {len(keys)} flops/* keys x {len(hist)} steps equal the log history; trackio: each of its steps once")


def trackio_steps(root, cell) -> list:
    "The optimizer steps of a cell's trackio run (its train/global_step per training record), in the order trackio stored them."
    import importlib
    os.environ["TRACKIO_DIR"] = str(root / "_tracking" / "trackio")  # trackio reads its folder at import
    import trackio.utils, trackio.sqlite_storage
    importlib.reload(trackio.utils); importlib.reload(trackio.sqlite_storage)
    logs = trackio.sqlite_storage.SQLiteStorage.get_logs(root.name, cell)
    return [r["train/global_step"] for r in logs if "train/flops/search" in r]


def tensorboard_scalars(folder) -> dict:
    "Every scalar series of a TensorBoard run folder, read by TensorBoard's own reader (which purges steps a restarted writer replaced)."
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    ea.Reload()
    return {k: [(e.step, e.value) for e in ea.Scalars(k)] for k in ea.Tags()["scalars"]}


def test_failed_evaluation_keeps_training_and_retries_only_evaluation(tmp_path, reference):
    "Training outputs are written before evaluation; an evaluation that fails (here: an unusable cache folder) leaves them, and --retry-failed only evaluates."
    g = grid(tmp_path, "ck")
    env = {**os.environ, "RACE_NB_CACHE": "/dev/null/cache"}  # the warm baseline cannot be cached: evaluation fails
    subprocess.run([RACE, "grid", "run", str(g), "--runs", str(tmp_path / "runs"), "--workers", "1"], env=env, capture_output=True, timeout=300)
    root = tmp_path / "runs" / "ck"
    cell = only_cell(root)
    st = grid_status(root)
    assert st.status.iloc[0] == "eval-failed" and st.trained.iloc[0], st
    before = {f: (cell / f).stat().st_mtime_ns for f in ("trained.json", "compute_card.txt", "log_history.json")}
    assert {"adapter", "ledger.parquet", "trained.json"} <= {p.name for p in cell.iterdir()} and not (cell / "metrics.json").exists()
    res = subprocess.run([RACE, "grid", "status", str(root)], capture_output=True, text=True)
    assert "--retry-failed re-runs only their evaluation" in res.stdout
    run_grid(g, runs_root=tmp_path / "runs", workers=1)  # not retried unless asked
    assert grid_status(root).status.iloc[0] == "eval-failed"
    run_grid(g, runs_root=tmp_path / "runs", workers=1, retry_failed=True)
    assert grid_status(root).status.iloc[0] == "done"
    assert {f: (cell / f).stat().st_mtime_ns for f in before} == before  # the training stage was not rerun
    assert "GRPO budget" not in (cell / "cell.log").read_text()
    same_run(reference, cell)










@pytest.mark.xdist_group("midcycle")  # in-process trainers: any worker may take it
def test_a_stop_inside_a_generation_cycle_checkpoints_there_and_resumes_the_cycle(tmp_path):
    "Issue 52: a stop request inside a mu=2 cycle (step 1 of 4) checkpoints at that optimizer step with trl's rollout buffer; the resumed run trains the rest of the cycle on the same rollouts and ends equal to an uninterrupted run (ledger, LoRA weights). Without the buffer the resume would generate again."
    import torch
    from transformers import TrainerCallback
    from race_nb.checkpoint import ROLLOUT_BUFFER, CellInterrupted, CheckpointCallback
    cfg = CellConfig(model="tiny-s", reward="sparse", arm="n8-m8-mu2", budget=1e15, max_steps=4, prompts_per_step=4, seed=0)

    class Ask(TrainerCallback):  # a stop request (as Slurm's warning gives one) at the end of step 1: inside the first cycle
        def __init__(self, ck): self.ck = ck
        def on_step_end(self, args, state, control, **kw):
            if state.global_step == 1: self.ck.asked = "a test's request"

    def trainer(work, ask=False):
        tr = build_trainer(cfg, work)
        ck = CheckpointCallback(2, mid_cycle=True)
        if ask: tr.add_callback(Ask(ck))
        tr.add_callback(ck)
        return tr

    def lora(tr): return {k: v.detach().clone() for k, v in tr.model.named_parameters() if "lora_" in k}
    ref = trainer(tmp_path / "ref"); ref.train()
    stopped = trainer(tmp_path / "cut", ask=True)
    with pytest.raises(CellInterrupted, match="checkpoint-1 written"):
        stopped.train()
    ckpt = tmp_path / "cut" / "checkpoint-1"
    assert (ckpt / ROLLOUT_BUFFER).exists() and (ckpt / "ledger.parquet").exists()
    resumed = trainer(tmp_path / "cut"); resumed.train(resume_from_checkpoint=str(ckpt))
    assert resumed.state.global_step == ref.state.global_step == 4
    pd.testing.assert_frame_equal(resumed.ledger.to_frame()[LEDGER_COLS], ref.ledger.to_frame()[LEDGER_COLS])
    a, b = lora(resumed), lora(ref)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    gens = lambda tr: sorted(tr.ledger.to_frame().query("phase == 'generate'").step.unique().tolist())
    assert gens(resumed) == gens(ref) == [0, 2]  # one generation per cycle, none repeated at the resume
    # the control: the same checkpoint without its buffer starts a new cycle at step 1 (what a boundary-only checkpoint forced)
    (ckpt / ROLLOUT_BUFFER).unlink()
    again = trainer(tmp_path / "cut"); again.train(resume_from_checkpoint=str(ckpt))
    assert 1 in gens(again), gens(again)
