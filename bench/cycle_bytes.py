"""Decode bytes of one generation cycle at the paper's widths, before and after issue 65 (COMPUTED, not measured).

    python bench/cycle_bytes.py [--out bench/cycle_bytes.json]

A cycle of the paper grid's largest arm (16 prompts x 16 rollouts = 256 rows, completion limit 2048, LoRA r 64 unmerged) is
priced by race_nb.roofline.decode_bytes over race_nb.roofline.decode_schedule: per decode step the weights once, each row's
cache up to its filled length, each group's prompt once where prompts are shared. The schedule is what race_nb.fastgen runs
(nbs/04d_roofline.ipynb checks it step for step against a real generation). Completion lengths are the stated prior,
race_nb.roofline.COMPLETION_PRIOR: uniform over 650-1000 of 2048 tokens (the range issue 65 gives as typical of GRPO on
math; an assumption, not a measurement). Rows:

- every row to the limit: what the roofline assumed before issue 65;
- before: race_nb.fastgen before issue 65 (every row runs until the call's longest row ends, each row holds its prompt);
- rows leave: finished rows leave the batch at the host syncs (every 8 tokens);
- after: rows leave and each group's prompt is stored and read once.
"""
import argparse, json, platform, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from race_nb.flops import LINEARS, LoraSpec, ModelFlops
from race_nb.memory import kv_bytes
from race_nb.roofline import COMPLETION_PRIOR, decode_bytes, decode_schedule, prior_lengths, step_weight_bytes

ROWS, GROUP, LIMIT = 256, 16, 2048


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "cycle_bytes.json"))
    a = ap.parse_args()
    out = dict(how="COMPUTED: race_nb.roofline.decode_bytes over decode_schedule (the schedule race_nb.fastgen runs)", prior=COMPLETION_PRIOR,
               rows=ROWS, group=GROUP, limit=LIMIT, python=platform.python_version(), table=[])
    L = prior_lengths(ROWS, LIMIT, GROUP)
    print(f"completion lengths: {min(L)}-{max(L)} of {LIMIT} (mean {sum(L) / len(L):.0f}; the prior, an assumption)")
    print(f"{'model':14} {'prompt':>6} {'limit TB':>9} {'before TB':>9} {'rows leave':>10} {'after TB':>9} {'after/before':>12} {'KV after/before':>15}")
    for name in ("qwen2.5-7b", "qwen2.5-1.5b"):
        mf = ModelFlops.from_config(name, lora=LoraSpec(64, LINEARS))
        for P in (256, 512):
            sched = {k: decode_schedule(L, P, LIMIT, g, c) for k, (g, c) in dict(before=(None, False), leave=(None, True), after=(GROUP, True)).items()}
            b = {k: decode_bytes(mf, ROWS, P, LIMIT, steps=s) for k, s in sched.items()}
            w = {k: len(s) * step_weight_bytes(mf) for k, s in sched.items()}  # the weights' share: read once per step whatever the rows
            limit = decode_bytes(mf, ROWS, P, LIMIT)
            row = dict(model=name, prompt=P, every_row_to_limit=limit, before=b["before"], rows_leave=b["leave"], after=b["after"],
                       after_over_before=b["after"] / b["before"], kv_after_over_before=(b["after"] - w["after"]) / (b["before"] - w["before"]),
                       weights_share_after=w["after"] / b["after"], steps=len(sched["after"]), kv_bytes_per_token=kv_bytes(mf))
            out["table"].append(row)
            print(f"{name:14} {P:6d} {limit / 1e12:9.2f} {b['before'] / 1e12:9.2f} {b['leave'] / 1e12:10.2f} {b['after'] / 1e12:9.2f} "
                  f"{row['after_over_before']:12.3f} {row['kv_after_over_before']:15.3f}")
    Path(a.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
