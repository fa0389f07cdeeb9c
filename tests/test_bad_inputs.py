"""Every `race` command on a wrong folder or file answers with one line naming what is wrong, a non-zero exit, and writes nothing
(issue 37): no traceback reaches the user. In-process (race_nb.cli.main), so the whole table costs seconds."""
import json

import pandas as pd
import pytest
import yaml

from race_nb.cli import main


def _inputs(tmp):
    "name -> path of each bad input."
    (tmp / "empty").mkdir()
    (tmp / "notruns").mkdir(); (tmp / "notruns" / "notes.txt").write_text("hello"); (tmp / "notruns" / "sub").mkdir()
    (tmp / "afile.txt").write_text("not a folder")
    failed = tmp / "allfailed"
    for i in range(2):
        d = failed / f"cell{i}"; d.mkdir(parents=True)
        (d / "params.yaml").write_text(yaml.safe_dump(dict(model="tiny-s", reward="sparse", arm="n8-m8", budget=1e9, seed=i)))
        (d / "status.json").write_text(json.dumps(dict(status="failed", error="RuntimeError: boom")))
    half = tmp / "halfwritten" / "cell0"; half.mkdir(parents=True)
    (half / "params.yaml").write_text("model: tiny-s\narm: [n8-m8\n")
    (tmp / "notyaml.yaml").write_text("name: x\naxes: {model: [tiny-s\n")
    (tmp / "list.yaml").write_text("- a\n- b\n")
    pd.DataFrame(dict(a=[1, 2])).to_parquet(tmp / "other.parquet")
    (tmp / "garbage.parquet").write_text("not parquet")
    (tmp / "nb.ipynb").write_text("{not json")
    return {n: tmp / n for n in ("empty", "notruns", "afile.txt", "allfailed", "halfwritten", "nonexistent", "notyaml.yaml", "list.yaml",
                                 "other.parquet", "garbage.parquet", "nb.ipynb")}


FOLDER_COMMANDS = [["grid", "status"], ["grid", "aggregate"], ["diagnose"], ["report"]]
FOLDERS = ["empty", "notruns", "afile.txt", "allfailed", "halfwritten", "nonexistent"]
EXPECT = {"empty": "is not a runs folder", "notruns": "is not a runs folder", "afile.txt": "that is a file", "nonexistent": "no runs folder at",
          "allfailed": "none of its 2 cells is done", "halfwritten": "is not a cell's parameters"}


def _run(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err.strip()
    return code, err


@pytest.mark.parametrize("cmd", FOLDER_COMMANDS, ids=lambda c: " ".join(c))
def test_folder_commands_answer_a_wrong_folder_in_one_line(tmp_path, capsys, cmd):
    inputs, table = _inputs(tmp_path), []
    for name in FOLDERS:
        if cmd[-1] in ("status", "aggregate") and name == "allfailed": continue  # a runs folder whose cells failed is one to show
        argv = cmd + [str(inputs[name])] + (["--out", str(tmp_path / "site")] if cmd == ["report"] else [])
        code, err = _run(argv, capsys)
        table.append((" ".join(cmd), name, err))
        assert code != 0 and len(err.splitlines()) == 1 and err.startswith(f"race {cmd[0]}: error:"), (name, err)
        assert EXPECT[name] in err, (name, err)
    assert not (tmp_path / "site").exists() and not list(tmp_path.rglob("results.parquet"))  # nothing written
    print("\n".join(f"{c} {n}: {e}" for c, n, e in table))


def test_status_and_aggregate_show_a_grid_whose_cells_all_failed(tmp_path, capsys):
    runs = _inputs(tmp_path)["allfailed"]
    assert main(["grid", "status", str(runs)]) == 0 and "failed cell0: RuntimeError: boom" in capsys.readouterr().out


def test_full_side_grid_card_and_pilot_answer_bad_files(tmp_path, capsys):
    inputs, table = _inputs(tmp_path), []
    cases = [(["diagnose", str(inputs["allfailed"]), "--full", str(inputs["empty"])], "none of its 2 cells is done"),
             (["grid", "run", str(inputs["notyaml.yaml"]), "--runs", str(tmp_path / "r")], "malformed YAML"),
             (["grid", "run", str(inputs["list.yaml"]), "--runs", str(tmp_path / "r")], "a grid is a mapping"),
             (["grid", "plan", str(inputs["notyaml.yaml"])], "malformed YAML"),
             (["grid", "run", str(inputs["nonexistent"]), "--runs", str(tmp_path / "r")], "no such grid file"),
             (["card", str(inputs["other.parquet"])], "is not a race_nb ledger"),
             (["card", str(inputs["garbage.parquet"])], "garbage.parquet"),
             (["card", str(inputs["nonexistent"])], "no ledger at"),
             (["pilot", str(inputs["nb.ipynb"]), "--budget", "1e9", "--runs", str(tmp_path / "r")], "nb.ipynb"),
             (["pilot", str(inputs["nonexistent"]), "--budget", "1e9", "--runs", str(tmp_path / "r")], "nonexistent")]
    for argv, expect in cases:
        code, err = _run(argv, capsys)
        table.append((" ".join(a if "/" not in a else a.rsplit("/", 1)[-1] for a in argv), err))
        assert code != 0 and len(err.splitlines()) == 1 and err.startswith(f"race {argv[0]}: error:") and expect in err, (argv, err)
    assert not (tmp_path / "r").exists()
    print("\n".join(f"{c}: {e}" for c, e in table))
