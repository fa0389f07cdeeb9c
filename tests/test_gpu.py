"""GPU paths without a GPU: workers pinned one GPU each, the staged GPU check refusing to pass without CUDA and rehearsed on CPU at toy shapes."""
import json, os, subprocess, sys

import pytest

from race_nb.grid import GridError, run_grid

from conftest import require_data
from helpers import CELL, GPU_CHECK



def test_local_workers_are_pinned_one_gpu_each(tmp_path, monkeypatch):
    "With GPUs visible, the default is one worker per GPU and each cell's kernel sees only its own (CUDA_VISIBLE_DEVICES; here on CPU, by id only)."
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    p = tmp_path / "pin.yaml"
    p.write_text(CELL.format(name="pin", budget="3.0e10", extra="").replace("seeds: [0]", "seeds: [0, 1]"))
    root = run_grid(p, runs_root=tmp_path / "runs")
    seen = sorted(json.loads((d / "status.json").read_text())["gpus_visible"] for d in root.iterdir() if d.is_dir())
    assert seen == ["3", "5"], seen
    with pytest.raises(GridError, match="use --workers 2"):
        run_grid(p, runs_root=tmp_path / "runs2", workers=3)


def test_gpu_check_refuses_to_pass_without_cuda():
    "Without CUDA and without --smoke the GPU check exits non-zero and names CUDA (it used to run its CPU path and exit 0)."
    import torch
    if torch.cuda.is_available(): pytest.skip("a CUDA device is visible: the refusal is for machines without one")
    res = subprocess.run([sys.executable, str(GPU_CHECK)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "no CUDA device" in res.stderr, res.stdout + res.stderr


def test_the_staged_gpu_check_runs_on_cpu_at_toy_shapes(tmp_path):
    "The staged GPU check on the CPU at toy shapes (what CI runs): each stage a subprocess writing its own JSON; S1 the worst "
    "cell's cycle with the memory marks per phase, S2 the random stream unchanged across an evaluation and a 2-cell grid stopped "
    "by a checkpoint request and resumed, S3 ledger = FlopCounterMode per component with the real-format PRM; it finds the "
    "shared data without RACE_DATA_DIR; P probes the versions and imports what the check runs, D times each generation path's decode step, G measures fast generation's peak."
    require_data("gsm8k", "test.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "RACE_DATA_DIR"}
    out = tmp_path / "gpu_check"
    res = subprocess.run([sys.executable, str(GPU_CHECK), "--smoke", "--out-dir", str(out)], capture_output=True, text=True, env=env, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    s1, s2, s3 = (json.loads((out / f"S{i}.json").read_text()) for i in (1, 2, 3))
    p, d, g = (json.loads((out / f"{k}.json").read_text()) for k in ("P", "D", "G"))
    assert p["status"] == "ok" and p["transformers"] and "vllm" in p and p["imports_checked"] > 20 and not p["imports_failed"], p
    paths = {r["path"] for r in d["rows"]}  # each path's decode step timed at each context, none failed
    assert d["status"] == "ok" and len(d["rows"]) == 10 and paths == {"fastgen", "fastgen-graphs", "fastgen-graphs-merged", "fastgen-sdpa", "transformers"}, d
    assert all(r["graphs"] == ("captured" if "graphs" in r["path"] else "off") and r["kernel_split_us"] for r in d["rows"]), d["rows"]
    assert g["status"] == "ok" and g["planned_gib"] > 0 and g["tokens"] == 24, g
    from race_nb.roofline import measured_efficiency
    assert json.loads((out / "decode.json").read_text())["smoke"] and measured_efficiency("H100", out / "decode.json") is None
    assert s1["status"] == "ok" and set(s1["marks"]) == {"generation", "scoring", "update"} and s1["marks"]["generation"]["rollouts"] == 4 * 16
    assert s1["cycle_seconds"] > 0 and s1["predicted_gib"]["generation"] > 0
    assert s2["rng_unchanged"] and s2["after_first_run"].get("interrupted") == 1 and s2["after_resume"] == {"done": 1} and s2["resumed_from"], s2
    assert abs(s3["ratio"] - 1) < 0.01 and all(abs(v - 1) < 0.01 for v in s3["components"].values()) and s3["phases"]["prm"] > 0
    assert json.loads((out / "gpu_check.json").read_text())["smoke"]
