"""The GPU check's bundle (bench/gpu_bundle.py): what it carries is what the GPU image lacks, and race_nb imports with only
the image's packages and the bundle's visible."""
import ast
import importlib.metadata as md
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import gpu_bundle as gb  # noqa: E402

# modules race_nb imports only where a developer or an optional tracker asks for them (never in a cell a GPU runs)
DEV_ONLY = {"nbdev": "race site's API pages (the chapters): a developer's command, pip install -e '.[dev]'",
            "trackio": "a tracker a grid names in report_to (optional, as wandb and mlflow)"}


@pytest.fixture(scope="module")
def carry():
    return gb.to_carry()


def test_image_list_is_dated_and_names_the_interpreter_and_torch():
    text = gb.IMAGE_LIST.read_text()
    assert "2026-11-17" in text and "KINDS.md" in text
    img = gb.image_packages()
    assert img["python"].startswith("3.12") and img["torch"] == "2.11.0" and img["transformers"] == "5.17.0"


def test_what_the_image_lacks_is_carried_with_its_reason(carry):
    # transformers is pinned above the image's 5.17; huggingface-hub 2.x (for it) needs httpx2 and truststore; transformers
    # imports kernels (tomlkit); trl, papermill and optuna are not on the image at all
    for name in ("transformers", "huggingface-hub", "httpx2", "httpcore2", "truststore", "kernels", "tomlkit", "trl", "papermill", "optuna"):
        assert name in carry, name
    assert "the image has 5.17.0" in carry["transformers"][1]
    for name in ("torch", "numpy", "pandas", "accelerate", "safetensors"):  # on the image at versions race_nb admits
        assert name not in carry, name
    assert "nbdev" not in carry and "execnb" not in carry  # developers' requirements, not run-time ones


def test_a_requirement_the_image_holds_at_an_excluded_version_is_carried():
    img = {"python": "3.12.3", "torch": "2.11.0", "tokenizers": "0.20.0"}
    assert "tokenizers" in gb.to_carry(["tokenizers>=0.23"], img)
    assert gb.to_carry(["tokenizers>=0.19"], img) == {}
    assert "peft" in gb.to_carry(["peft>=0.21,<0.22"], {"python": "3.12.3", "peft": None})  # unknown version, capped: carried


def test_a_requirement_not_installed_here_is_named():
    with pytest.raises(RuntimeError, match="no-such-dist-xyz"):
        gb.to_carry(["no-such-dist-xyz>=1"], {"python": "3.12.3"})


def test_race_nb_imports_on_the_image_with_the_bundle(carry):
    ok, msg, hidden = gb.check_imports(carry)
    assert ok, msg
    assert "nbdev" in hidden and "jupyterlab" in hidden  # the check really hides what the image would not have


def test_the_import_check_fails_when_a_carried_package_is_missing(carry):
    without = {k: v for k, v in carry.items() if k != "httpx2"}
    ok, msg, hidden = gb.check_imports(without, ["transformers", "race_nb.grpo"])
    assert not ok and "httpx2" in msg and "httpx2" in hidden


def _third_party_imports() -> dict:
    "{top-level module: [race_nb files importing it]} of every import in race_nb that is neither stdlib nor race_nb."
    out = {}
    for f in (ROOT / "race_nb").rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for n in names:
                top = n.split(".")[0]
                if top not in sys.stdlib_module_names and top != "race_nb": out.setdefault(top, []).append(f.name)
    return out


def test_every_module_race_nb_imports_is_a_run_time_requirement(carry):
    image, dists = gb.image_packages(), md.packages_distributions()
    runtime = set(carry) | set(image)
    missing = []
    for mod, files in sorted(_third_party_imports().items()):
        names = {gb.norm(d) for d in dists.get(mod, [])}
        assert names, f"{mod} (imported by {files}) belongs to no installed distribution"
        if mod in DEV_ONLY: assert not names & set(carry) - {"race-nb"}, mod; continue
        if not names & runtime: missing.append(f"{mod} ({sorted(names)}, imported by {sorted(set(files))})")
    assert not missing, "imported at run time but neither a run-time requirement nor on the image: " + "; ".join(missing)
