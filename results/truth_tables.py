"""Population 2's full-budget truth on the pilot's own arms (issue 53, run (a)): the high-minus-low-update contrast on pass@1
(n4-m4-mu4 minus n16-m4) per configuration, with three seeds (the committed full side, seeds 4-6) and with eight (those plus
grids/race-regimes2-topup.yaml's seeds 7-11), labelled by race_nb.race.truth_label: high-update / low-update where the 95%
seed-level interval excludes 0, equivalent where the 90% interval lies within +/- 0.02 (two one-sided tests), undetermined
otherwise. Nothing typed in.

    python results/truth_tables.py [--runs RUNS_ROOT] [--write]

--runs reads runs/race-regimes2-topup (and --write refreshes the parquet copies results/race-regimes2/topup_*.parquet);
without it the copies are read.
"""
import argparse, sys
from pathlib import Path

import numpy as np
import pandas as pd

from race_nb.grid import aggregate, per_prompt_results
from race_nb.race import EQUIVALENCE_MARGIN, _paired_diff, arm_values, truth_label

HERE = Path(__file__).resolve().parent / "race-regimes2"
LOW, HIGH, TARGET = "n16-m4", "n4-m4-mu4", "pass1_id"
KEYS = ["model", "reward", "learning_rate"]


def load(runs_root: Path | None, write: bool):
    full, fpp = pd.read_parquet(HERE / "full_results.parquet"), pd.read_parquet(HERE / "full_per_prompt.parquet")
    d = runs_root / "race-regimes2-topup" if runs_root else None
    if d is not None and d.is_dir():
        top, tpp = aggregate(d, write=False), per_prompt_results(d)
        if write:
            top.to_parquet(HERE / "topup_results.parquet", index=False); tpp.to_parquet(HERE / "topup_per_prompt.parquet", index=False)
    else: top, tpp = pd.read_parquet(HERE / "topup_results.parquet"), pd.read_parquet(HERE / "topup_per_prompt.parquet")
    return full, fpp, top, tpp


def truths(full, fpp, top, tpp) -> pd.DataFrame:
    both = pd.concat([full, top], ignore_index=True)
    both = both[(both.status == "done") & both.arm.isin([LOW, HIGH])]
    pp = pd.concat([fpp, tpp], ignore_index=True)
    rows = []
    for key, g in both.groupby(KEYS, sort=True):
        rec = dict(zip(KEYS, key))
        for name, seeds in (("3 seeds", sorted(full.seed.unique())), ("8 seeds", sorted(g.seed.unique()))):
            gg = g[g.seed.isin(seeds)]
            arms, s, V = arm_values(gg, TARGET, pp)
            t = truth_label(_paired_diff(V, [arms.index(HIGH)], [arms.index(LOW)]))
            rec.update({f"{name}: label": t["label"], f"{name}: contrast": t["est"], f"{name}: lo": t["lo"], f"{name}: hi": t["hi"],
                        f"{name}: seeds": t["seeds"]})
            if name == "8 seeds":
                per_seed = np.nanmean(_paired_diff(V, [arms.index(HIGH)], [arms.index(LOW)]), axis=1)
                rec["seed_sd"] = float(np.std(per_seed, ddof=1))
        rows.append(rec)
    return pd.DataFrame(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=None)
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    t = truths(*load(Path(a.runs) if a.runs else None, a.write))
    f = lambda r, n: f"{r[n + ': label']} ({r[n + ': contrast']:+.3f} [{r[n + ': lo']:+.3f}, {r[n + ': hi']:+.3f}], {r[n + ': seeds']} seeds)"
    print(f"# population 2, pass@1, {HIGH} minus {LOW}; equivalence margin {EQUIVALENCE_MARGIN}\n")
    print("| configuration | 3 seeds (committed full side) | 8 seeds (topped up) | per-seed SD (8) |\n|---|---|---|---|")
    for _, r in t.iterrows():
        print(f"| {r.model} / {r.reward} / {r.learning_rate:.2g} | {f(r, '3 seeds')} | {f(r, '8 seeds')} | {r.seed_sd:.3f} |")
    for n in ("3 seeds", "8 seeds"):
        print(f"\n{n}: " + ", ".join(f"{k} {v}" for k, v in t[f"{n}: label"].value_counts().reindex(
            ["undetermined", "high-update", "low-update", "equivalent"]).fillna(0).astype(int).items()))


if __name__ == "__main__":
    sys.exit(main())
