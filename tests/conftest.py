"""Shared test settings (never touch the network, keep torch on the two CI cores) and the runs and site that several test files read."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPORT_GRID = """name: reportgrid
fixed: {n_eval: 10, eval_max_new_tokens: 64, prompts_per_step: 4}
axes:
  model: [tiny-s]
  arm: [n8-m8, n8-m4]
budgets: [1.0e6, 3.0e10]
seeds: [0]
"""


@pytest.fixture(scope="session")
def report_runs(tmp_path_factory):
    "A micro grid's runs (two cells done, two failed: budget too small), for the report and the site."
    from race_nb.grid import run_grid
    tmp = tmp_path_factory.mktemp("report")
    (tmp / "grid.yaml").write_text(REPORT_GRID)
    return run_grid(tmp / "grid.yaml", runs_root=tmp / "runs", workers=2, min_cycles=0)  # two cells fail: budget too small


SITE_CHAPTERS = ["index", "01_flops", "09_report"]  # the README; math and tables; figures


@pytest.fixture(scope="session")
def site_build(report_runs, tmp_path_factory):
    "`race site` on the micro grid (validated against itself) with three chapters, by the fallback renderer: (site folder, the command's output)."
    out = tmp_path_factory.mktemp("site") / "_site"
    race = str(Path(sys.executable).with_name("race"))
    res = subprocess.run([race, "site", str(report_runs), "--out", str(out), "--renderer", "fallback", "--full", str(report_runs),
                          "--chapters", *SITE_CHAPTERS, "--workers", "2"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return out, res.stdout
