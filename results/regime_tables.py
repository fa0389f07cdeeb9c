"""The tables of results/race-regimes/README.md and results/race-regimes2/README.md, computed from the runs (nothing typed in).

    python results/regime_tables.py race-regimes [race-regimes2 ...] [--runs RUNS_ROOT] [--write]

Each POPULATION names a pilot grid and its full side (grids/POPULATION-pilot.yaml, grids/POPULATION-full.yaml). Its cells
are read from RUNS_ROOT/POPULATION-pilot and RUNS_ROOT/POPULATION-full when those exist (`race grid run ...`), else
from the parquet copies in results/POPULATION/ (which --write refreshes from the runs). With several populations the
tables are printed for each, then for all of them pooled (configurations stay apart: they differ in policy or
learning rate)."""
import argparse, sys
from pathlib import Path

import numpy as np
import pandas as pd

from race_nb.grid import aggregate, per_prompt_results
from race_nb.race import (Thresholds, bootstrap_validation, config_keys, confusion_table, diagnose, disagreement_pattern, power_table,
                          validate, validation_summary)
from race_nb.report import paper_claims

HERE = Path(__file__).resolve().parent
NAMES = ("pilot_results", "full_results", "pilot_per_prompt", "full_per_prompt")


def table(df: pd.DataFrame, floatfmt=".3f") -> str:
    "A markdown table (pipe format) without the tabulate dependency."
    cols = list(df.columns)
    num = lambda v: f"{v:.0e}" if 0 < abs(v) < 1e-3 else f"{v:{floatfmt}}"  # learning rates stay readable
    fmt = lambda v: (num(v) if isinstance(v, (float, np.floating)) and np.isfinite(v) else "-" if isinstance(v, float) else str(v))
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def load(population: str, runs_root: Path | None, write: bool) -> tuple:
    "(pilot, full, pilot per-prompt, full per-prompt) of a population: from its runs when present, else its committed copies."
    pdir, fdir = (runs_root / f"{population}-pilot", runs_root / f"{population}-full") if runs_root else (None, None)
    out = HERE / population
    if pdir is not None and pdir.is_dir() and fdir.is_dir():
        tables = (aggregate(pdir), aggregate(fdir), per_prompt_results(pdir), per_prompt_results(fdir))
        if write:
            out.mkdir(exist_ok=True)
            for name, df in zip(NAMES, tables): df.to_parquet(out / f"{name}.parquet", index=False)
        return tables
    missing = [n for n in NAMES if not (out / f"{n}.parquet").exists()]
    if missing: raise SystemExit(f"{population}: no runs under {runs_root} and no copies {missing} in {out}")
    return tuple(pd.read_parquet(out / f"{n}.parquet") for n in NAMES)


def report(pilot, full, pp, fp) -> None:
    "Print cost, per-target validation tables, the summary over targets and the report's claims."
    keys = config_keys(pilot, full)
    print(f"pilot: {len(pilot)} cells, {(pilot.status == 'done').sum()} done; full: {len(full)} cells, {(full.status == 'done').sum()} done")
    contrast_arms = full[full.arm.isin(pilot.arm.unique())]
    print(f"pilot FLOPs / full FLOPs: {pilot.flops_total.sum() / full.flops_total.sum():.1%} "
          f"(of the full side's cells of the pilot's arms: {pilot.flops_total.sum() / contrast_arms.flops_total.sum():.1%})")
    ev = lambda d: d.flops_total.sum() + d.flops_eval.fillna(0).sum()
    print(f"with evaluation: pilot / full {ev(pilot) / ev(full):.1%} (of the full side's cells of the pilot's arms: {ev(pilot) / ev(contrast_arms):.1%})")
    for name, df in (("pilot", pilot), ("full", full)):
        print(f"{name}: sum of cell wall times {df.wall_seconds.sum() / 60:.1f} min; budgeted FLOPs {df.flops_total.sum():.3e}, "
              f"evaluation FLOPs {df.flops_eval.sum():.3e}")
    for target in ("pass1_id", "pass1_ood", "judge", "native_reward"):
        vt, s = validate(pilot, full, target, Thresholds(n_boot=50), pilot_prompts=pp, full_prompts=fp)
        assert not s["shared_seeds"], s["shared_seeds"]  # the pilot's seeds are its own
        print(f"\n## {target}\n")
        print(f"full-budget truths (decisive calls; 'no regime' where the seed-level interval covers 0): {s['full_truths']}; "
              "point-estimate signs: " + ", ".join(f"{n} {d}" for d, n in vt.full_direction.value_counts().items()))
        if s.get("kappa_note"): print(f"kappa on decisive calls: {s['kappa_note']}")
        if s.get("kappa_vs_full_call_note"): print(f"kappa vs the full call: {s['kappa_vs_full_call_note']}")
        cols = keys + ["pilot_call", "pilot_reason", "pilot_contrast", "pilot_lo", "pilot_hi", "full_call", "full_contrast", "full_lo", "full_hi",
                       "correct", "call_arm", "gain_vs_trl_default", "gain_vs_trl_default_lo", "gain_vs_trl_default_hi"]
        print("\n" + table(vt.reindex(columns=cols).sort_values(keys)))
        print("\nconfusion (rows: pilot call; columns: full-budget call)\n")
        print(table(confusion_table(vt).reset_index().rename(columns={"pilot call": "pilot call \\ full call"}), floatfmt="d"))
        print("\n95% bootstrap intervals over configurations\n")
        print(table(bootstrap_validation(vt).reset_index()))
    print("\n## every target\n")
    cols = ["target", "configurations", "full_truths", "decisive_calls", "coverage", "accuracy_decisive", "agreement_with_full_call", "kappa",
            "kappa_vs_full_call", "majority_direction", "majority_accuracy", "same_regime_rate", "mean_gain_vs_trl_default"]
    print(table(validation_summary(pilot, full, pilot_prompts=pp, full_prompts=fp).reindex(columns=cols)))
    print("\n## power: median smallest detectable contrast (80% power, 5% level; seed-level se, projected from variance components)\n")
    th = Thresholds(n_boot=20)  # the fit-regime bootstrap is not what the power table reads
    for name, df, prompts in (("pilot", pilot, pp), ("full", full, fp)):
        pt = power_table(diagnose(df, ("pass1_id", "judge"), th, prompts, keys))
        print(f"{name}:\n\n" + table(pt.reset_index()) + "\n")
    print("\n## the report's claims (race_nb.report.paper_claims, pilot with --full)\n")
    print(table(paper_claims(pilot, pp, full, fp)))
    if full.arm.nunique() >= 3:  # an interior arm exists: the paper's target-disagreement pattern can be looked for
        print("\n## target disagreement on the full side (dense / PRM; pass@1 best at a high-update arm, judge at an interior one)\n")
        extra = [k for k in keys if k not in ("model", "reward")]
        parts = [disagreement_pattern(g, fp).assign(**dict(zip(extra, v if isinstance(v, tuple) else (v,))))
                 for v, g in (full.groupby(extra) if extra else [((), full)])]
        print(table(pd.concat(parts, ignore_index=True)))
    if "learning_rate" in keys:
        print("\n## contrast against the learning rate (pass1_id, mean over the other configuration columns)\n")
        vt, _ = validate(pilot, full, "pass1_id", Thresholds(n_boot=20), pilot_prompts=pp, full_prompts=fp)
        print(table(vt.groupby([k for k in ("model", "learning_rate") if k in keys])[["pilot_contrast", "full_contrast"]].mean().reset_index(), floatfmt=".4f"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("populations", nargs="+", help="e.g. race-regimes race-regimes2")
    ap.add_argument("--runs", default=None, help="root folder of the runs (default: read the committed copies)")
    ap.add_argument("--write", action="store_true", help="refresh results/POPULATION/*.parquet from the runs")
    a = ap.parse_args()
    loaded = {p: load(p, Path(a.runs) if a.runs else None, a.write) for p in a.populations}
    for p, tables in loaded.items():
        print(f"\n# {p}\n")
        report(*tables)
    if len(loaded) > 1:
        print(f"\n# pooled: {' + '.join(loaded)}\n")
        report(*(pd.concat([t[i] for t in loaded.values()], ignore_index=True) for i in range(4)))


if __name__ == "__main__":
    sys.exit(main())
