"""The `race` console script as a user runs it."""
import subprocess
import sys

import pytest
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


def _commands(parser) -> dict:
    "A parser's subcommands: name -> its parser."
    import argparse
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def test_help_names_every_command_and_each_command_has_its_own_help(capsys):
    "Issue 68: `race --help` lists exactly the parser's commands (read from the parser, not a hand-kept list), and every command "
    "and grid subcommand answers --help with its own usage line."
    import re
    from race_nb.cli import _parser, main
    p = _parser()
    cmds = _commands(p)
    listed = re.search(r"\{([^}]*)\}", run("--help").stdout).group(1).split(",")
    assert sorted(listed) == sorted(cmds) and len(cmds) >= 10, listed
    for name in [*cmds, *(f"grid {n}" for n in _commands(cmds["grid"]))]:
        with pytest.raises(SystemExit) as e: main([*name.split(), "--help"])
        out = capsys.readouterr().out
        assert e.value.code == 0 and out.startswith(f"usage: race {name}"), (name, out[:200])


def test_tables_prints_the_truth_table_from_the_committed_copies(capsys):
    "`race tables truth`: population 2's truth table from results/race-regimes2 (what results/race-forecast/README.md shows)."
    from race_nb.cli import main
    assert main(["tables", "truth"]) == 0
    out = capsys.readouterr().out
    assert "8 seeds: undetermined 3, high-update 3, low-update 4, equivalent 2" in out


def test_diagnose_missing_runs_is_a_clear_error(tmp_path):
    res = run("diagnose", str(tmp_path / "nothing"))
    assert res.returncode == 1 and "no runs folder" in res.stderr
