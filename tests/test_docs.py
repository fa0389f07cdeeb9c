"""The library's shape: API docs for the methods built across cells, the README's one source, and light modules that load without torch."""
import json, subprocess, sys
from pathlib import Path

from race_nb.core import project_root


def test_public_methods_have_doc_entries():
    "Methods attached with @patch are indexed under their real names (nbdev skips `_` names and hand-attached ones)."
    from race_nb._modidx import d
    syms = d["syms"]
    want = {"race_nb.flops": ["ModelFlops.forward", "ModelFlops.generate", "ModelFlops.train_step", "ModelFlops.n_params", "ModelFlops.merge_flops"],
            "race_nb.ledger": ["FlopsLedger.rho", "FlopsLedger.save", "FlopsLedger.load", "FlopsLedger.compute_card"],
            "race_nb.grpo": ["LedgerGRPOTrainer.compute_loss", "LedgerGRPOTrainer.training_step", "LedgerGRPOTrainer._generate_and_score_completions"]}
    for mod, names in want.items():
        missing = [n for n in names if f"{mod}.{n}" not in syms[mod]]
        assert not missing, f"{mod}: no doc entry for {missing}"


def test_grids_race_and_report_load_without_torch():
    code = "import sys, race_nb.race, race_nb.grid, race_nb.report, race_nb.config; print(json.dumps(sorted(m for m in ('torch', 'trl', 'transformers', 'peft') if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [], out.stdout


def test_readme_is_index_notebook():
    "README.md is generated from nbs/index.ipynb (`make readme`): edit the notebook, not the README."
    nb = json.loads((project_root() / "nbs" / "index.ipynb").read_text())
    text = "\n\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    assert (project_root() / "README.md").read_text().strip() == text.strip()


def _import_graph() -> dict:
    "Module -> the race_nb modules it imports (module level or inside a function), from the source."
    import ast
    root = Path(__file__).resolve().parents[1] / "race_nb"
    def name(p):
        parts = p.relative_to(root.parent).with_suffix("").parts
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    files = {name(p): p for p in root.rglob("*.py") if p.stem != "_modidx"}
    graph = {}
    for mod, p in files.items():
        pkg = mod if p.stem == "__init__" else mod.rpartition(".")[0]
        deps = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.ImportFrom):
                base = ".".join(pkg.split(".")[:len(pkg.split(".")) - n.level + 1]) if n.level else ""
                deps.add(".".join(x for x in (base, n.module) if x))
            elif isinstance(n, ast.Import): deps |= {a.name for a in n.names}
        graph[mod] = {d for d in deps if d in files} - {mod, "race_nb"}
    return graph



def test_the_package_has_no_import_circles():
    "Issue 38: no module of race_nb imports (at module level or inside a function) one that imports it back, directly or around a loop."
    graph = _import_graph()
    assert {"race_nb.grid", "race_nb.grid.spec"} <= set(graph) and "race_nb.grid.spec" in graph["race_nb.grid.run"]  # packages and relative imports resolve
    def loop_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            m, path = stack.pop()
            for d in graph.get(m, ()):
                if d == start: return path + [d]
                if d not in seen: seen.add(d); stack.append((d, path + [d]))
    loops = [l for m in graph if (l := loop_from(m))]
    assert not loops, loops[:3]


HOUSE = [  # issue 60: the trainer and RACE, one job per module, in the order they may import one another (never back up)
    ["race_nb.config", "race_nb.gpus", "race_nb.ledger", "race_nb.flops", "race_nb.flop_check", "race_nb.memory", "race_nb.roofline"],
    ["race_nb.render", "race_nb.report", "race_nb.site"],
    # issue 68: a cell's walk, one room per step: the grid's environment (edge) and resume records, the trainer's parts, the
    # contract's join, the drop-in trainer, the cell's trainer (build), evaluation, the cell's life, the grid that runs it
    ["race_nb.edge", "race_nb.resume", "race_nb.fastgen", "race_nb.checkpoint", "race_nb.learning_signal", "race_nb.charge", "race_nb.tracking",
     "race_nb.contract", "race_nb.grpo", "race_nb.build", "race_nb.eval", "race_nb.cell", "race_nb.grid.run"],
    ["race_nb.race.keys", "race_nb.race.contrast", "race_nb.race.moderate", "race_nb.race.fits", "race_nb.race.diagnose",
     "race_nb.race.validate", "race_nb.race.claims", "race_nb.race"],
]


def test_the_house_imports_one_way():
    "Issue 60: within each group a module imports only those listed before it (no import runs back up), and no module passes 550 lines (keyed by path)."
    graph = _import_graph()
    for group in HOUSE:
        for i, mod in enumerate(group):
            assert mod in graph, f"{mod}: no such module"
            back = graph[mod] & set(group[i + 1:])
            assert not back, f"{mod} imports {sorted(back)}, listed after it"
    root = Path(__file__).resolve().parents[1] / "race_nb"
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in root.rglob("*.py") if p.stem != "_modidx"}  # by path: core.py and rewards/core.py apart
    assert {"core.py", "rewards/core.py"} <= set(sizes)
    assert max(sizes.values()) < 550, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]
    for light in ("race_nb.flops", "race_nb.flop_check", "race_nb.roofline", "race_nb.memory", "race_nb.race.contrast", "race_nb.ledger", "race_nb.reproduction", "race_nb.gpus", "race_nb.edge",
                  "race_nb.resume", "race_nb.cell"):  # torch-free modules import no torch at module level
        code = f"import sys, json, {light}; print(json.dumps(sorted(m for m in ('torch', 'trl', 'transformers', 'peft') if m in sys.modules)))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        assert json.loads(out.stdout) == [], (light, out.stdout)
