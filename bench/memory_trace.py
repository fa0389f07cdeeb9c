"""The memory plan's formulas (race_nb.memory) against a weightless trace at the full depth of the paper's models (issue 52).

    python bench/memory_trace.py [--out bench/memory_trace.json]

Each row builds the model from its shipped config inside torch's FakeTensorMode (no weights, no memory allocated), runs one
phase under torch's MemTracker (`race_nb.memory.traced_peak`) and prints the traced peak beside `planned_peak`, the same
formulas `race grid plan` uses, with their ratio; then race_nb.fastgen's generation at the paper cell's 256 rows and 2048 new
tokens (`traced_generation_peak` against `planned_peak(..., "generation")`). CPU only; a GPU's own peak (autocast copies, the allocator) is measured by
bench/gpu_check.py's stage S1. The suite checks the same formulas at two layers (nbs/04c_memory.ipynb)."""
import argparse, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from race_nb.memory import GiB, planned_peak, traced_generation_peak, traced_peak

ROWS = [  # config, phase, batch, seq, lora_r, checkpointing, cache
    ("qwen2.5-7b", "update", 2, 2560, 64, True, True),     # one micro-batch row pair of the paper cell's update at 512 + 2048 tokens
    ("qwen2.5-7b", "update", 1, 1024, 64, False, True),    # without gradient checkpointing: every layer's activations
    ("qwen2.5-7b", "forward", 16, 512, 64, True, True),    # the prefill of 16 rollouts at 512 prompt tokens, KV cache kept
    ("qwen2.5-math-prm-7b", "forward", 4, 4096, None, True, False),  # the PRM's scoring forward of 16384 padded tokens
    ("qwen2.5-1.5b", "update", 2, 2560, 64, True, True),
    ("qwen2.5-3b", "update", 2, 2560, 64, True, True),
]
GENERATION = [  # config, rows, prompt, new tokens, rollouts per prompt (None: each row its own prompt): race_nb.fastgen at the paper cell's batch
    ("qwen2.5-7b", 256, 512, 2048, 16),
    ("qwen2.5-7b", 256, 1024, 2048, 16),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "memory_trace.json"))
    ap.add_argument("--only", choices=("phases", "generation"), help="run one table only (the other's rows are kept from --out)")
    a = ap.parse_args()
    old = json.loads(Path(a.out).read_text()) if Path(a.out).exists() else {}
    out = dict(how="race_nb.memory.traced_peak (FakeTensorMode + MemTracker, CPU, full depth) vs planned_peak", python=platform.python_version(), rows=[])
    import torch
    out["torch"] = torch.__version__
    out["rows"] = old.get("rows", []) if a.only == "generation" else []
    print(f"{'config':22} {'phase':8} {'batch':>5} {'seq':>5} {'gc':>3} {'traced GiB':>10} {'planned GiB':>11} {'ratio':>6} {'secs':>6}")
    for cfg, phase, b, s, r, gc, cache in ([] if a.only == "generation" else ROWS):
        t0 = time.time()
        tr = traced_peak(cfg, phase, b, s, lora_r=r, checkpointing=gc, cache=cache)
        pl = planned_peak(cfg, phase, b, s, lora_r=r, checkpointing=gc, cache=cache)
        secs = time.time() - t0
        row = dict(config=cfg, phase=phase, batch=b, seq=s, lora_r=r, checkpointing=gc, cache=cache, traced=tr, planned=pl,
                   ratio=pl / tr["Total"], seconds=secs)
        out["rows"].append(row)
        print(f"{cfg:22} {phase:8} {b:5d} {s:5d} {('yes' if gc else 'no') if phase == 'update' else '-':>3} {tr['Total'] / GiB:10.2f} "
              f"{pl / GiB:11.2f} {pl / tr['Total']:6.3f} {secs:6.1f}", flush=True)
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n")
    out["generation"] = old.get("generation", []) if a.only == "phases" else []
    print(f"\nfast generation (race_nb.fastgen, CUDA layout, full depth, every row to the limit):\n"
          f"{'config':22} {'rows':>5} {'prompt':>6} {'new':>5} {'group':>5} {'traced GiB':>10} {'planned GiB':>11} {'ratio':>6} {'secs':>6}")
    for cfg, b, P, C, grp in ([] if a.only == "phases" else GENERATION):
        t0 = time.time()
        tr = traced_generation_peak(cfg, b, P, C, group=grp)
        pl = planned_peak(cfg, "generation", b, P, new_tokens=C, group=grp)
        row = dict(config=cfg, rows=b, prompt=P, new_tokens=C, group=grp, traced=tr, planned=pl, ratio=pl / tr["Total"], seconds=time.time() - t0)
        out["generation"].append(row)
        print(f"{cfg:22} {b:5d} {P:6d} {C:5d} {grp or '-':>5} {tr['Total'] / GiB:10.2f} {pl / GiB:11.2f} {pl / tr['Total']:6.3f} {row['seconds']:6.0f}", flush=True)
        Path(a.out).write_text(json.dumps(out, indent=2) + "\n")  # each row as it is measured


if __name__ == "__main__":
    main()
