"""The frozen forecasting rule (issue 36): chosen on development runs, frozen before any held-out cell ran. This test pins it;
changing FROZEN after the held-out runs would break the pre-registration (git log shows the order)."""
import pandas as pd

from race_nb.forecast import FROZEN, frozen_rule


def test_the_frozen_rule_is_pinned():
    assert frozen_rule() == dict(method="fixed", cutoff=0.5, skip=1)
    assert (FROZEN["pilot_fraction"], FROZEN["milestones"], FROZEN["seeds"], FROZEN["alpha"], FROZEN["abstain_arm"]) == (0.25, 8, 3, 0.05, "n8-m8")
    assert "re-selected 2026-12-04" in FROZEN["chosen_on"]  # issue 53: re-frozen (the same rule) on the 8-seed truth, before the amended held-out runs


def test_the_validation_record_is_what_the_committed_runs_give():
    "Issue 53: `race pilot`'s reliability note reads results/race-forecast/validation.json; its development record must be what\n    race_nb.forecast_tables (`race tables forecast`) computes from the committed parquet copies (nothing typed in). The points and counts are recomputed\n    here; the bootstrap intervals come from the same code with a fixed seed."
    import json
    from race_nb.core import project_root
    from race_nb.forecast import curve_values, forecast_validation
    from race_nb import forecast_tables as ft
    rec = json.loads((project_root() / "results" / "race-forecast" / "validation.json").read_text())
    assert rec["rule"] == FROZEN["name"] and rec["target"] == "pass1_id"
    assert "status" in rec["populations"]["heldout"]  # not run, how far it got, or done with its verdict
    for pop, got in rec["populations"].items():
        if got["status"] != "done": continue
        pilot, pp, ms, full, fpp = ft.load(pop, None, False)
        vt = forecast_validation(pilot, curve_values(pilot, ms, pp, "pass1_id"), full, fpp, ft.FULL_BUDGET, ft.CANDIDATES)
        t = vt[vt.method == FROZEN["name"]]
        det = t[(t.call != "abstain") & t.truth.isin(["high-update", "low-update"])]
        assert (got["configurations"], got["decisive"], got["on_determinate"], got["right"]) == (
            t.config.nunique(), int((t.call != "abstain").sum()), len(det), int((det.call == det.truth).sum())), pop
        regret = vt.groupby("method").regret.mean()
        best = f"best arm at the pilot budget ({FROZEN['cutoff']:g})"
        assert abs(got["vs_default"][0] - (regret[FROZEN["name"]] - regret["trl's default arm"])) < 1e-12, pop
        assert abs(got["best_vs_default"][0] - (regret[best] - regret["trl's default arm"])) < 1e-12, pop
        assert got["best_vs_default"][1] <= got["best_vs_default"][0] <= got["best_vs_default"][2]
        assert got["truths"] == {k: int(v) for k, v in t.truth.value_counts().items()}, pop
        # issue 61: the pilot's sign against the truth at each pilot budget, and how the seed SD and |contrast| scale, recomputed
        from race_nb.forecast import budget_scaling, scaling_slopes, sign_record
        sr = sign_record(budget_scaling(pilot, curve_values(pilot, ms, pp, "pass1_id"), full, fpp, ft.FULL_BUDGET))
        rows = got["budget"]["rows"]
        assert [(r["fraction"], r["agree"], r["determinate"], r["sign_changes"], r["configurations"]) for r in rows] == [
            (float(r.fraction), None if pd.isna(r.agree) else int(r.agree), int(r.determinate), int(r.sign_changes), int(r.configurations))
            for r in sr.itertuples()], pop
        assert all(abs(a["median_seed_sd"] - b) < 1e-12 for a, b in zip(rows, sr.median_seed_sd)), pop
        assert abs(got["budget"]["slopes"]["contrast"] - scaling_slopes(sr)["contrast"]) < 1e-12, pop
        if pop == "heldout":  # the verdict is the pre-registered rule applied to the recorded endpoints
            from race_nb.forecast import HELDOUT_RULE
            (e1, lo, hi), (k, n, e2_lo, e2_hi) = got["E1"], got["E2"]
            assert (k, n) == (got["right"], got["on_determinate"]) and abs(e1 - got["vs_default"][0]) < 1e-12
            m, a, c = HELDOUT_RULE["margin"], HELDOUT_RULE["agreement"], HELDOUT_RULE["min_calls"]
            want = ("fails" if lo > m or (n >= c and e2_hi < a) else "inconclusive" if n < c else
                    "holds" if hi <= m and e2_lo >= a else "inconclusive")
            assert got["verdict"] == want, (got["verdict"], want)
