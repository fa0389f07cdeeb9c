"""A grid's resources and schedules, refused before anything is submitted when they cannot work: bad resource lines, schedules that cannot finish, cells longer than their limit."""
import subprocess

import pytest

from race_nb.grid import GridError, check_schedule, load_grid, plan_grid

from helpers import RACE, grid



@pytest.mark.parametrize("extra,msg", [
    ("resources: {gpu: 1}\n", r"resources.gpu: unknown resource; valid: gpus"),
    ("resources: {time: soon}\n", "is not minutes, MM:SS"),
    ("resources: {by: {model: {tiny-xl: {gpus: 2}}}}\n", "not one of the grid's model values"),
    ("resources: {by: {lr: {1: {gpus: 2}}}}\n", "not a parameter of this grid"),
    ("checkpoint: {every: 3}\n", "checkpoint.every: unknown key"),
])
def test_bad_resources_are_refused_with_their_line(tmp_path, extra, msg):
    with pytest.raises(GridError, match=msg):
        load_grid(grid(tmp_path, "bad", extra=extra))


@pytest.mark.parametrize("extra,msg", [
    ("resources: {time: 1}\n", "leaves no time before Slurm's 90 s warning"),
    ("resources: {time: 20}\ncheckpoint: {minutes: 30}\n", "checkpoint.minutes: 30 min does not fit"),
    ("resources: {time: 20}\ncheckpoint: false\n", None),  # fits in one allocation: no checkpoints needed
])
def test_schedules_that_cannot_finish_are_refused_before_submission(tmp_path, extra, msg):
    g = load_grid(grid(tmp_path, "sched", extra=extra))
    plan = plan_grid(g)
    if msg is None: check_schedule(g, plan); return
    with pytest.raises(GridError, match=msg): check_schedule(g, plan)
    res = subprocess.run([RACE, "grid", "run", str(grid(tmp_path, "sched", extra=extra)), "--executor", "slurm", "--cluster", "local", "--runs", str(tmp_path / "runs")],
                         capture_output=True, text=True)
    assert res.returncode == 1 and msg.split(":")[-1].strip() in res.stderr and not (tmp_path / "runs").exists(), res.stderr


def test_a_cell_longer_than_its_limit_needs_checkpoints_or_enough_requeues(tmp_path):
    "At a given rate, a cell estimated at more than its time limit is refused without checkpoints, and needs requeues with them."
    g = load_grid(grid(tmp_path, "long", budget="6.0e10", extra="resources: {time: 2, signal_delay: 30, max_requeues: 1}\ncheckpoint: false\n"))
    slow = 1e8  # a rate given (race grid plan --rate): 6e10 FLOPs at 1e8 FLOP/s: 10 minutes
    plan = plan_grid(g, rate=slow)
    assert plan.est_minutes.iloc[0] == pytest.approx(10) and plan.allocations.iloc[0] == float("inf")
    with pytest.raises(GridError, match="checkpoint: false` leaves it nothing to resume from"): check_schedule(g, plan)
    g = load_grid(grid(tmp_path, "long", budget="6.0e10", extra="resources: {time: 2, signal_delay: 30, max_requeues: 1}\ncheckpoint: {minutes: 1}\n"))
    plan = plan_grid(g, rate=slow)
    assert plan.allocations.iloc[0] == 7  # 10 min in allocations of 2 min less the 30 s warning
    with pytest.raises(GridError, match="needs 7 allocations of 2 min, more than resources.max_requeues"): check_schedule(g, plan)
