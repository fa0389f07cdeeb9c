"""The frozen forecasting rule (issue 36): chosen on development runs, frozen before any held-out cell ran. This test pins it;
changing FROZEN after the held-out runs would break the pre-registration (git log shows the order)."""
from race_nb.forecast import FROZEN, frozen_rule


def test_the_frozen_rule_is_pinned():
    assert frozen_rule() == dict(method="fixed", cutoff=0.5, skip=1)
    assert (FROZEN["pilot_fraction"], FROZEN["milestones"], FROZEN["seeds"], FROZEN["alpha"], FROZEN["abstain_arm"]) == (0.25, 8, 3, 0.05, "n8-m8")
    assert "re-selected 2026-12-04" in FROZEN["chosen_on"]  # issue 53: re-frozen (the same rule) on the 8-seed truth, before the amended held-out runs
