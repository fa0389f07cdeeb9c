"""The tables of results/race-regimes/README.md, computed from the runs (nothing typed in).

    python results/race-regimes/make_tables.py RUNS_ROOT [--write]

RUNS_ROOT holds race-regimes-pilot/ and race-regimes-full/ (`race grid run grids/race-regimes-{pilot,full}.yaml`).
--write also copies the results and per-prompt values into this folder as parquet files."""
import argparse, sys
from pathlib import Path

import numpy as np
import pandas as pd

from race_nb.grid import aggregate, per_prompt_results
from race_nb.race import bootstrap_validation, config_keys, confusion_table, validate, validation_summary
from race_nb.report import paper_claims

HERE = Path(__file__).resolve().parent


def table(df: pd.DataFrame, floatfmt=".3f") -> str:
    "A markdown table (pipe format) without the tabulate dependency."
    cols = list(df.columns)
    num = lambda v: f"{v:.0e}" if 0 < abs(v) < 1e-3 else f"{v:{floatfmt}}"  # learning rates stay readable
    fmt = lambda v: (num(v) if isinstance(v, (float, np.floating)) and np.isfinite(v) else "-" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs_root")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    root = Path(a.runs_root)
    pdir, fdir = root / "race-regimes-pilot", root / "race-regimes-full"
    pilot, full = aggregate(pdir), aggregate(fdir)
    pp, fp = per_prompt_results(pdir), per_prompt_results(fdir)
    if a.write:
        for name, df in (("pilot_results", pilot), ("full_results", full), ("pilot_per_prompt", pp), ("full_per_prompt", fp)):
            df.to_parquet(HERE / f"{name}.parquet", index=False)
    keys = config_keys(pilot, full)
    print(f"pilot: {len(pilot)} cells, {(pilot.status == 'done').sum()} done; full: {len(full)} cells, {(full.status == 'done').sum()} done")
    print(f"pilot FLOPs / full FLOPs: {pilot.flops_total.sum() / full.flops_total.sum():.1%} "
          f"(of the full side's two contrast arms: {pilot.flops_total.sum() / full[full.arm != 'n8-m8'].flops_total.sum():.1%})")
    for name, df in (("pilot", pilot), ("full", full)):
        print(f"{name}: sum of cell wall times {df.wall_seconds.sum() / 60:.1f} min; budgeted FLOPs {df.flops_total.sum():.3e}, "
              f"evaluation FLOPs {df.flops_eval.sum():.3e}")
    for target in ("pass1_id", "pass1_ood", "judge", "native_reward"):
        vt, s = validate(pilot, full, target, pilot_prompts=pp, full_prompts=fp)
        assert not s["shared_seeds"], s["shared_seeds"]  # the pilot's seeds are its own
        print(f"\n## {target}\n")
        print("full-budget directions: " + ", ".join(f"{n} {d}" for d, n in vt.full_direction.value_counts().items())
              + "; full calls: " + ", ".join(f"{n} {d}" for d, n in vt.full_call.value_counts().items()))
        cols = keys + ["pilot_call", "pilot_contrast", "pilot_lo", "pilot_hi", "full_call", "full_contrast", "full_lo", "full_hi",
                       "correct", "call_arm", "gain_vs_trl_default", "gain_vs_trl_default_lo", "gain_vs_trl_default_hi"]
        print("\n" + table(vt.reindex(columns=cols).sort_values(keys)))
        print("\nconfusion (rows: pilot call; columns: full-budget call)\n")
        print(table(confusion_table(vt).reset_index().rename(columns={"pilot call": "pilot call \\ full call"}), floatfmt="d"))
        bv = bootstrap_validation(vt).reset_index()
        print("\n95% bootstrap intervals over configurations\n")
        print(table(bv))
    print("\n## every target\n")
    cols = ["target", "configurations", "decisive_calls", "coverage", "accuracy_decisive", "agreement_with_full_call", "kappa",
            "kappa_vs_full_call", "majority_direction", "majority_accuracy", "same_regime_rate", "mean_gain_vs_trl_default"]
    print(table(validation_summary(pilot, full, pilot_prompts=pp, full_prompts=fp).reindex(columns=cols)))
    print("\n## the report's claims (race_nb.report.paper_claims, pilot with --full)\n")
    print(table(paper_claims(pilot, pp, full, fp)))
    print("\n## contrast against the learning rate (pass1_id, full side, mean over rewards)\n")
    vt, _ = validate(pilot, full, "pass1_id", pilot_prompts=pp, full_prompts=fp)
    print(table(vt.groupby("learning_rate")[["pilot_contrast", "full_contrast"]].mean().reset_index(), floatfmt=".4f"))


if __name__ == "__main__":
    sys.exit(main())
