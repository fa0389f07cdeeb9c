"""The tables of results/race-forecast/README.md: RACE's forecasting rules and the baselines, per population, from the runs
(or the committed parquet copies). Nothing typed in.

    python results/forecast_tables.py dev [--runs RUNS_ROOT] [--write] [--validation]

dev: the development pilot (grids/race-forecast-dev-pilot.yaml: population 2's configurations, two arms at a quarter of
the budget, 8 milestones, seeds 30-32) against population 2's committed full side (results/race-regimes2/full_*.parquet).

The candidate rules and the selection rule were written here before the development runs finished, and the rule chosen
by it is frozen in race_nb.forecast.FROZEN (pinned by a test) before any held-out cell runs:
- candidates: fixed-fraction at 1/4 and 1/8 of the budget (the paper's pilot; 1/8 is the first half of the same cells'
  curves), the log-FLOPs trend at 1/4 and 1/8, the saturating curve at 1/4; the first milestone skipped (skip=1);
- selection: the lowest mean regret of the recommended arm on pass@1 among the rules whose decisive calls are right at
  least 80% of the time with at least 2 decisive calls; if none qualifies, the lowest mean regret; ties to the cheaper pilot.
"""
import argparse, json, sys
from pathlib import Path

import pandas as pd

from race_nb.forecast import (FROZEN, TRUTH_ORDER, budget_scaling, curve_values, forecast_summary, forecast_validation, grid_milestones,
                               heldout_verdict, regret_table, scaling_slopes, sign_record)
from race_nb.grid import aggregate, per_prompt_results

HERE = Path(__file__).resolve().parent
FULL_BUDGET = 1.2e12
CANDIDATES = {"fixed (1/4)": dict(method="fixed", cutoff=1.0), "fixed (1/8)": dict(method="fixed", cutoff=0.5),
              "trend (1/4)": dict(method="trend", cutoff=1.0, skip=1), "trend (1/8)": dict(method="trend", cutoff=0.5, skip=1),
              "saturating (1/4)": dict(method="saturating", cutoff=1.0, skip=1)}
POPULATIONS = {"dev": ("race-forecast-dev-pilot", HERE / "race-regimes2"),  # pilot grid, folder of the full side's parquet copies
               "dev8": ("race-forecast-dev-pilot", HERE / "race-regimes2"),  # the same, its truth topped up to 8 seeds on the two contrast arms (issue 53)
               "heldout": ("race-forecast-heldout-pilot", HERE / "race-forecast" / "heldout")}  # pre-registered (grids/race-forecast-heldout-*.yaml)


def select(summary: pd.DataFrame) -> str:
    "The selection rule above."
    rules = summary[summary.kind == "rule"]
    ok = rules[(rules.accuracy >= 0.8) & (rules.decisive >= 2)]
    pool = ok if len(ok) else rules
    return pool.sort_values(["regret", "pilot_share"]).method.iloc[0]


def load(pop: str, runs_root: Path | None, write: bool):
    name, full_dir = POPULATIONS[pop]
    out, tag = HERE / "race-forecast", "dev" if pop == "dev8" else pop  # dev8: the development pilot's copies
    pdir = runs_root / name if runs_root else None
    if pdir is not None and pdir.is_dir():
        pilot, pp, ms = aggregate(pdir), per_prompt_results(pdir), grid_milestones(pdir)
        if write:
            out.mkdir(exist_ok=True)
            for n, df in ((f"{tag}_pilot_results", pilot), (f"{tag}_pilot_per_prompt", pp), (f"{tag}_pilot_milestones", ms)):
                df.to_parquet(out / f"{n}.parquet", index=False)
    else:
        pilot, pp, ms = (pd.read_parquet(out / f"{tag}_pilot_{n}.parquet") for n in ("results", "per_prompt", "milestones"))
    fdir = runs_root / name.replace("-pilot", "-full") if runs_root else None
    if fdir is not None and fdir.is_dir():  # a population whose full side ran here (the held-out one); --write keeps its copies
        full, fpp = aggregate(fdir), per_prompt_results(fdir)
        if write:
            full_dir.mkdir(parents=True, exist_ok=True)
            full.to_parquet(full_dir / "full_results.parquet", index=False); fpp.to_parquet(full_dir / "full_per_prompt.parquet", index=False)
    else:
        full, fpp = pd.read_parquet(full_dir / "full_results.parquet"), pd.read_parquet(full_dir / "full_per_prompt.parquet")
    if pop == "dev8":  # grids/race-regimes2-topup.yaml's seeds 7-11 (results/truth_tables.py --write keeps the copies)
        full = pd.concat([full, pd.read_parquet(full_dir / "topup_results.parquet")], ignore_index=True)
        fpp = pd.concat([fpp, pd.read_parquet(full_dir / "topup_per_prompt.parquet")], ignore_index=True)
    return pilot, pp, ms, full, fpp


def fmt(v, lo=None, hi=None):
    if pd.isna(v): return "-"
    return f"{v:+.3f} [{lo:+.3f}, {hi:+.3f}]" if lo is not None and pd.notna(lo) else f"{v:.3f}"


LABELS = {"dev": "development (population 2: tiny-l x sparse/dense/prm x 4 learning rates, 12 configurations; truth 3 seeds)",
          "dev8": "development (population 2: tiny-l x sparse/dense/prm x 4 learning rates, 12 configurations; truth 8 seeds)",
          "heldout": "held-out test (population 3: tiny-m x sparse/dense/prm x 3 learning rates, 9 configurations; pre-registered)"}
VALIDATION = HERE / "race-forecast" / "validation.json"  # what `race pilot` reads for its reliability note


def progress(pop: str, runs_root: Path | None) -> tuple[bool, str]:
    "Whether every cell of the population's pilot and full grids is done (in runs_root, else in the committed copies), and a line saying how far they got."
    from race_nb.core import project_root
    from race_nb.grid import load_grid
    name, full_dir = POPULATIONS[pop]
    if pop != "heldout": return True, "done"
    counts = []
    for grid, copy in ((name, HERE / "race-forecast" / "heldout_pilot_results.parquet"), (name.replace("-pilot", "-full"), full_dir / "full_results.parquet")):
        want = len(load_grid(project_root() / "grids" / f"{grid}.yaml")["cells"])
        d = runs_root / grid if runs_root else None
        got = aggregate(d, write=False) if d is not None and d.is_dir() else pd.read_parquet(copy) if copy.exists() else pd.DataFrame(columns=["status"])
        counts.append((grid, int((got.status == "done").sum()), want))
    done = all(g == w for _, g, w in counts)
    line = ", ".join(f"{g} {k} of {w} cells done" for g, k, w in counts)
    return done, ("done" if done else f"not finished: {line} (resume: race grid run grids/<grid>.yaml --runs runs --workers 2)"
                  if any(k for _, k, _ in counts) else "not run")


def budget_record(scaling: pd.DataFrame) -> dict:
    "What the pilot's sign is worth at each pilot budget (race_nb.forecast.sign_record) and how the seed SD and |contrast| scale (validation.json)."
    sr = sign_record(scaling)
    rows = []
    for r in sr.to_dict("records"):
        rows.append({k: (None if v is None or v != v else int(v) if k in ("agree", "determinate", "configurations", "sign_changes") else float(v)) for k, v in r.items()})
    return dict(rows=rows, slopes=scaling_slopes(sr))


def record(pop: str, vt: pd.DataFrame, s: pd.DataFrame, rt: pd.DataFrame, full: pd.DataFrame, n_boot: int, scaling: pd.DataFrame | None = None) -> dict:
    "The validation record of the frozen rule on one population (validation.json)."
    rule, s, rt = FROZEN["name"], s.set_index("method"), rt.set_index("method")
    t = vt[vt.method == rule]
    det = t[(t.call != "abstain") & t.truth.isin(["high-update", "low-update"])]
    best = f"best arm at the pilot budget ({FROZEN['cutoff']:g})"
    tri = lambda m: [float(rt.loc[m, "vs_base"]), float(rt.loc[m, "vs_base_lo"]), float(rt.loc[m, "vs_base_hi"])]
    rec = dict(label=LABELS[pop], status="done", configurations=int(t.config.nunique()), decisive=int(s.loc[rule, "decisive"]),
               on_determinate=len(det), right=int((det.call == det.truth).sum()), vs_default=tri(rule), best_vs_default=tri(best),
               truths={k: int(v) for k, v in t.truth.value_counts().items()})
    if scaling is not None: rec["budget"] = budget_record(scaling)
    if pop == "heldout":
        v = heldout_verdict(vt, full, rule, n_boot=n_boot)
        rec.update(verdict=v["verdict"], reason=v["reason"], E1=[v["E1"], v["E1_lo"], v["E1_hi"]], E2=[v["E2_right"], v["E2_calls"], *(None if pd.isna(x) else x for x in (v["E2_lo"], v["E2_hi"]))],
                   E3=None if pd.isna(v["E3"]) else v["E3"])  # null, not NaN: validation.json stays standard JSON
    return rec


def table(t: pd.DataFrame) -> str:
    return "\n".join(["| " + " | ".join(t.columns) + " |", "|" + "---|" * len(t.columns)]
                     + ["| " + " | ".join(map(str, r)) + " |" for r in t.itertuples(index=False)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("populations", nargs="+", choices=list(POPULATIONS))
    ap.add_argument("--runs", default=None)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--n-boot", type=int, default=2000)
    ap.add_argument("--validation", action="store_true", help=f"write the frozen rule's record per population into {VALIDATION.relative_to(HERE.parent)}")
    a = ap.parse_args()
    runs_root = Path(a.runs) if a.runs else None
    val = json.loads(VALIDATION.read_text()) if VALIDATION.exists() else {}
    val.update(rule=FROZEN["name"], target="pass1_id", written_by="results/forecast_tables.py --validation")
    val.setdefault("populations", {})
    for pop in a.populations:
        done, line = progress(pop, runs_root)
        if not done:  # a pre-registered population is read only once every cell of it is done
            print(f"# {pop}: {line}\n")
            val["populations"][pop] = dict(label=LABELS[pop], status=line)
            continue
        pilot, pp, ms, full, fpp = load(pop, runs_root, a.write)
        curves = curve_values(pilot, ms, pp, "pass1_id")
        vt = forecast_validation(pilot, curves, full, fpp, FULL_BUDGET, CANDIDATES)
        s = forecast_summary(vt, n_boot=a.n_boot)
        per = vt.drop_duplicates("config")
        print(f"# {pop}: {pilot.cell.nunique()} pilot cells, {len(per)} configurations, {full.cell.nunique()} full-budget cells\n")
        print("Truth on the pilot's own arms (pass@1, high- minus low-update, race.truth_label): "
              + ", ".join(f"{k} {int(v)}" for k, v in per.truth.value_counts().reindex(list(TRUTH_ORDER)).fillna(0).items()) + "\n")
        print(table(pd.DataFrame([dict(configuration=r.config, truth=r.truth, contrast=fmt(r.truth_est, r.truth_lo, r.truth_hi), seeds=r.truth_seeds)
                                   for r in per.itertuples()])) + "\n")
        rows = [dict(method=r.method, regret=fmt(r.regret, r.regret_lo, r.regret_hi),
                     decisive=f"{int(r.decisive)}" if pd.notna(r.decisive) else "-",
                     on_determinate=f"{int(r.on_determinate)}" if pd.notna(r.on_determinate) else "-",
                     on_equivalent=f"{int(r.on_equivalent)}" if pd.notna(r.on_equivalent) else "-",
                     accuracy=fmt(r.accuracy, r.accuracy_lo, r.accuracy_hi) if pd.notna(r.accuracy) else "-",
                     coverage=fmt(r.coverage) if pd.notna(r.coverage) else "-",
                     kappa=fmt(r.kappa, r.kappa_lo, r.kappa_hi) if pd.notna(r.kappa) else "-",
                     pilot_share=f"{r.pilot_share:.1%}") for r in s.itertuples()]
        print(table(pd.DataFrame(rows)))
        print(f"\nselected by the rule: {select(s)}\n")
        rt = regret_table(vt, full, n_boot=a.n_boot)
        scaling = budget_scaling(pilot, curves, full, fpp, FULL_BUDGET)
        if pop != "dev": val["populations"][pop] = record(pop, vt, s, rt, full, a.n_boot, scaling)  # dev: the same runs as dev8 with the 3-seed truth
        print(f"Paired regret against trl's default arm (two-level bootstrap: configurations, then seeds; {a.n_boot} resamples):\n")
        print(table(pd.DataFrame([dict(method=r.method, regret=fmt(r.regret, r.regret_lo, r.regret_hi),
                                       **{"minus trl's default": fmt(r.vs_base, r.vs_base_lo, r.vs_base_hi)}) for r in rt.itertuples()])) + "\n")
        if pop == "heldout":
            v = heldout_verdict(vt, full, n_boot=a.n_boot)
            print(f"HELD-OUT VERDICT for the frozen rule {v['rule']!r} (pre-registered, grids/race-forecast-heldout-full.yaml): **{v['verdict']}** - {v['reason']}")
            print(f"  E1 paired regret vs n8-m8: {v['E1']:+.3f} [{v['E1_lo']:+.3f}, {v['E1_hi']:+.3f}] (regret {v['regret']:+.3f} [{v['regret_lo']:+.3f}, {v['regret_hi']:+.3f}])")
            print(f"  E2 sign agreement on determinate truths: {v['E2_right']} of {v['E2_calls']}" + (f" [{v['E2_lo']:.2f}, {v['E2_hi']:.2f}]" if v['E2_calls'] else ""))
            print(f"  E3 (secondary) Spearman of forecast and truth over {v['configurations']} configurations: {v['E3']:+.2f}; decisive calls {v['decisive']}; truths {v['truths']}\n")
        cols = ["config", "truth", "truth_est", "method", "call", "forecast", "forecast_lo", "forecast_hi", "recommended_arm", "regret"]
        print(vt[vt.kind == "rule"][cols].to_string(index=False, float_format=lambda x: f"{x:+.3f}"))
    if a.validation:
        VALIDATION.write_text(json.dumps(val, indent=1) + "\n")
        print(f"\nwrote {VALIDATION}")


if __name__ == "__main__":
    sys.exit(main())
