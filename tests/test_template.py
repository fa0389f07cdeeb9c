"""The papermill cell template: every CellConfig field declared, overrides reach the cell, a misspelt parameter fails it."""
import os, subprocess, sys
from pathlib import Path


from race_nb.core import project_root
from race_nb.config import CellConfig




def test_template_declares_every_cell_field_and_overrides_work(tmp_path):
    "Issue 66: the template's parameters cell is every CellConfig field with its typed default (written from the dataclass) and the "
    "cell's own parameters; a field given with -p and overrides both reach the CellConfig over the params file."
    import nbformat, yaml
    from race_nb.contract import cell_parameters_source
    tpl = project_root() / "nbs" / "experiments" / "grpo_cell.ipynb"
    params = next(c for c in nbformat.read(tpl, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
    assert params.source == cell_parameters_source(), "nbs/experiments/grpo_cell.ipynb's parameters cell is not what cell_parameters_source writes"
    CellConfig(budget=3e10, n_eval=5, prompts_per_step=4, eval_max_new_tokens=32).to_yaml(tmp_path / "params.yaml")
    out = tmp_path / "cell"
    import papermill as pm
    from race_nb.kernels import SOCKET_ENV, warm_manager
    warm = dict(kernel_manager_class=warm_manager()) if os.environ.get(SOCKET_ENV) else {}  # the kernel forks from the session's server, as a grid's cells do
    pm.execute_notebook(str(tpl), str(tmp_path / "out.ipynb"), kernel_name="race_nb", cwd=str(tmp_path), progress_bar=False,
                        parameters=dict(params_file=str(tmp_path / "params.yaml"), output_dir=str(out), seed=2, overrides=dict(arm="n8-m4")),
                        log_output=False, **warm)
    got = yaml.safe_load((out / "params.yaml").read_text())
    assert (got["budget"], got["n_eval"], got["seed"], got["arm"]) == (3e10, 5, 2, "n8-m4")
    assert (out / "metrics.json").exists()


def test_a_misspelt_papermill_parameter_fails_the_cell(tmp_path):
    "Issue 66: `papermill ... -p budgett 5e10` exits non-zero naming `budget`, and writes no metrics; with --inject-output-path and no "
    "output_dir the cell's folder is beside the output notebook; nothing is written into the repository."
    tpl = project_root() / "nbs" / "experiments" / "grpo_cell.ipynb"
    pm = str(Path(sys.executable).with_name("papermill"))
    before = set(os.listdir(project_root()))
    res = subprocess.run([pm, str(tpl), str(tmp_path / "out.ipynb"), "-k", "race_nb", "--inject-output-path", "-p", "budgett", "5e10"],
                         capture_output=True, text=True, timeout=300, cwd=project_root())
    assert res.returncode != 0 and "unknown parameter 'budgett' (did you mean 'budget'?)" in res.stdout + res.stderr, res.stderr[-2000:]
    assert not list(tmp_path.rglob("metrics.json")) and set(os.listdir(project_root())) == before
    own = project_root() / "nbs" / "experiments" / "own_run.ipynb"
    res = subprocess.run([pm, str(own), str(tmp_path / "own.ipynb"), "-k", "race_nb", "-p", "bugdet", "4e9"], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert res.returncode != 0 and "unknown parameter 'bugdet' (did you mean 'budget'" in res.stdout + res.stderr, res.stderr[-2000:]
