"The claims' verdict rule, frozen before the seed top-up (results/claims-rule.md): its constants and its outcomes on known intervals."
import math
import numpy as np
import pytest
from race_nb.race import CLAIM_MARGIN, RATE_MARGIN, claim_above, claim_value, seed_interval, share_interval, verdict


def test_the_frozen_margins_are_a_tenth():
    assert (CLAIM_MARGIN, RATE_MARGIN) == (0.1, 0.1)


@pytest.mark.parametrize("lo, hi, expected", [(0.65, 0.78, "reproduced"), (0.45, 0.60, "not reproduced"), (0.85, 0.9, "not reproduced"),
                                              (0.55, 0.70, "inconclusive"), (0.40, 0.95, "inconclusive"), (math.nan, math.nan, "inconclusive"),
                                              (0.70, 0.70, "inconclusive")])
def test_a_value_claim_is_judged_by_where_the_interval_lies(lo, hi, expected):
    assert verdict(lo, hi, claim_value(0.72)).split(" (")[0] == expected


def test_a_direction_claim_needs_the_whole_interval_on_its_side():
    assert verdict(0.01, 0.3, claim_above(0)) == "reproduced"
    assert verdict(-0.3, -0.01, claim_above(0)) == "not reproduced"
    assert verdict(-0.11, 0.08, claim_above(0)).startswith("inconclusive")


def test_no_verdict_rests_on_an_interval_of_no_width():
    est, lo, hi = seed_interval([0.53, 0.53])
    assert verdict(lo, hi, claim_value(0.53)).startswith("inconclusive (an interval of no width")


def test_two_seeds_give_a_t_interval_on_one_degree_of_freedom():
    est, lo, hi = seed_interval([0.4, 0.6])
    assert est == pytest.approx(0.5) and hi - est == pytest.approx(12.706 * np.std([0.4, 0.6], ddof=1) / math.sqrt(2), rel=1e-3)


def test_a_share_gets_an_exact_interval():
    k, lo, hi = share_interval(0, 9)
    assert k == 0 and lo == 0 and hi == pytest.approx(0.3363, abs=1e-3)
    assert verdict(lo, hi, claim_above(0.5)) == "not reproduced"


def test_no_decisive_update_call_on_seeds_that_agree_exactly():
    "Two seeds whose high-minus-low contrast is equal (-0.003 in both) give a t interval of no width: the call abstains, not 'low-update'."
    from race_nb.race import synthetic_results, update_call
    g = synthetic_results({("tiny-s", "prm"): lambda r: 0.5}, seeds=2, noise=0.0)
    g["pass1_id"] = np.where(g.arm.isin(["n8-m8", "n8-m8-mu4"]), 0.497, 0.5)  # the same contrast in every seed
    c = update_call(g, "pass1_id")
    assert c["call"] == "abstain" and "no width" in c["reason"], c
    g.loc[g.seed == 1, "pass1_id"] -= np.where(g[g.seed == 1].arm.isin(["n8-m8", "n8-m8-mu4"]), 0.001, 0.0)  # a spread: a real interval
    assert "no width" not in update_call(g, "pass1_id")["reason"]
