"""The `race` console script as a user runs it."""
import subprocess
import sys
from pathlib import Path

from race_nb.ledger import FlopsLedger

RACE = [str(Path(sys.executable).with_name("race"))]


def run(*args):
    return subprocess.run(RACE + list(args), capture_output=True, text=True, timeout=120)


def test_card_prints_compute_card(tmp_path):
    led = FlopsLedger(budget=1e12)
    led.record(0, "search", "generate", 4e11)
    led.record(0, "learning", "update", 6e11)
    res = run("card", str(led.save(tmp_path / "ledger.parquet")))
    assert res.returncode == 0, res.stderr
    assert "rho = learning / total = 0.600" in res.stdout


def test_card_missing_file_is_a_clear_error(tmp_path):
    res = run("card", str(tmp_path / "missing.parquet"))
    assert res.returncode == 1 and "no ledger at" in res.stderr


def test_flops_table_and_unknown_name():
    assert "qwen2.5-7b" in run("flops").stdout
    res = run("flops", "gpt-17")
    assert res.returncode == 1 and "qwen2.5-1.5b" in res.stderr


def test_help_lists_every_command():
    res = run("--help")
    for cmd in ("grid", "diagnose", "report", "demo", "card", "flops"):
        assert cmd in res.stdout


def test_diagnose_missing_runs_is_a_clear_error(tmp_path):
    res = run("diagnose", str(tmp_path / "nothing"))
    assert res.returncode == 1 and "no runs folder" in res.stderr
