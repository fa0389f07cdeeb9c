"""Shared test settings (never touch the network, keep torch on the two CI cores) and the runs and site that several test files read."""
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pin_xdist_worker() -> list[int] | None:
    "Under pytest-xdist (`make test` on 2 or more cores), pin this worker to its own share of the usable cores, before torch starts "
    "a thread pool: worker i of W takes the i-th of W equal slices. Everything the worker starts inherits it - grids size their "
    "workers and threads from it (race_nb.grid.usable_cpus), kernels and `race` subprocesses too - so two workers never fight "
    "over one core. Returns the cores taken (None: not a worker, or fewer cores than workers)."
    w, n = os.environ.get("PYTEST_XDIST_WORKER", ""), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not w.startswith("gw") or n < 2 or not hasattr(os, "sched_setaffinity"): return None
    cores, i = sorted(os.sched_getaffinity(0)), int(w[2:])
    if len(cores) < n: return None
    share = cores[i * len(cores) // n:(i + 1) * len(cores) // n]
    os.sched_setaffinity(0, share)
    return share


SHARED = Path(os.environ.get("RACE_DATA_DIR") or Path(__file__).resolve().parents[2] / "shared" / "data")  # GSM8K and MATH-500 (never in the repo)


def require_data(*parts: str) -> Path:
    "The shared data file `parts` under RACE_DATA_DIR; a test skips, saying where it looked, when it is missing - and fails "
    "instead under RACE_REQUIRE_DATA=1 (CI sets it, as it sets RACE_REQUIRE_SLURM and RACE_REQUIRE_BROWSER)."
    p = SHARED.joinpath(*parts)
    if not p.exists():
        why = f"no {'/'.join(parts)} at {SHARED} (set RACE_DATA_DIR to the folder holding gsm8k/ and math500/)"
        if os.environ.get("RACE_REQUIRE_DATA") == "1": pytest.fail(f"RACE_REQUIRE_DATA=1 but {why}")
        pytest.skip(why)
    return p


ALL_CORES = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None  # before the pin
PINNED = pin_xdist_worker()


@pytest.fixture
def shared_data() -> Path:
    "The shared data folder, GSM8K and MATH-500 in it (`require_data`: skipped without them, or failed under RACE_REQUIRE_DATA=1)."
    for name in ("gsm8k", "math500"): require_data(name, "test.jsonl")
    return SHARED


@pytest.fixture
def all_cores():
    "For a test whose result depends on torch's thread count (a bitwise reproduction of weights shipped from a run on every core): "
    "while it runs, the process has the machine's cores and torch the threads an unpinned process gets, as in a serial run; then "
    "the worker's pin again. It shares those cores with the other workers meanwhile (slower, same bits)."
    if PINNED is None: yield; return
    import torch
    threads = torch.get_num_threads()
    os.sched_setaffinity(0, ALL_CORES)
    unpinned = int(subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"], capture_output=True, text=True).stdout)
    torch.set_num_threads(unpinned)
    try: yield
    finally:
        torch.set_num_threads(threads)
        os.sched_setaffinity(0, PINNED)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    "`--dist loadgroup`: the tests marked `xdist_group(name)` run on one worker, which builds their shared fixtures once. pytest-xdist "
    "3.8 marks a grouped test by suffixing `item._nodeid` with `@name`, which pytest 9 no longer reads (a node's id is `item._id`): "
    "without this, every test was scheduled alone and each worker built the shared fixtures again."
    if not getattr(config.option, "loadgroup", False): return
    for item in items:
        names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")})
        if not names or "@" in item.nodeid: continue
        if hasattr(item, "_id"):
            from _pytest.nodes import coerce_node_id
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(names)}")
        else: item._nodeid = f"{item.nodeid}@{'_'.join(names)}"

@pytest.fixture(scope="session", autouse=True)
def warm_kernel_server():
    "One warm kernel server (race_nb.kernels) for the whole session, as an expensive shared fixture: every grid a test runs, in this "
    "process or in a `race` subprocess (which inherits RACE_KERNEL_SOCKET), forks its cells' kernels from it instead of starting its "
    "own server (about 7 s of imports per grid on 2 cores). Per-grid servers still run in nbs/00b_kernels.ipynb, the Slurm tests, "
    "the kill -9 tests and the micro grid (`own_kernel_server`); RACE_TEST_OWN_SERVERS=1 turns the sharing off everywhere."
    from race_nb.kernels import warm_kernels
    with warm_kernels(enabled=os.environ.get("RACE_TEST_OWN_SERVERS") != "1") as sock:
        yield sock


@contextlib.contextmanager
def own_kernel_server():
    "Inside: grids start their own warm kernel server, as outside the tests. Used where a test's subject is how a grid's "
    "processes live and die (kill -9 tests: a per-grid server dies with its runner, and so at once do its kernels) or where "
    "preloaded modules must see the grid's environment (trackio reads TRACKIO_DIR when imported)."
    from race_nb.kernels import SOCKET_ENV
    sock = os.environ.pop(SOCKET_ENV, None)
    try: yield
    finally:
        if sock: os.environ[SOCKET_ENV] = sock


@pytest.fixture
def own_server():
    with own_kernel_server(): yield


MICRO_GRID = """name: micro
fixed: {n_eval: 10, eval_max_new_tokens: 64, prompts_per_step: 4, milestones: 0}  # nothing it feeds reads learning curves (tests/test_milestones.py does)
axes:
  model: [tiny-s]
  arm: [n8-m8, n8-m4]
budgets: [1.0e6, 3.0e10]
seeds: [0, 1]
"""


@pytest.fixture(scope="session")
def micro_runs(tmp_path_factory):
    "One micro grid's runs, shared by the grid, report and site tests: 8 cells, the 4 at 3e10 done and tracked (TensorBoard, trackio), "
    "the 4 at 1e6 failed (budget too small for one step). Run from the grid's folder with a relative runs root, as `race demo` does."
    from race_nb.grid import run_grid
    tmp = tmp_path_factory.mktemp("micro")
    (tmp / "micro.yaml").write_text(MICRO_GRID)
    here = os.getcwd()
    os.chdir(tmp)
    try:
        with own_kernel_server(): root = run_grid(tmp / "micro.yaml", runs_root="runs", workers=2, min_cycles=0, report_to=["tensorboard", "trackio"])
    finally: os.chdir(here)
    return (tmp / root).resolve()


@pytest.fixture(scope="session")
def report_runs(micro_runs):
    "The runs the report and the site are built from: the micro grid's (four cells done, four failed)."
    return micro_runs


SITE_CHAPTERS = ["index", "01_flops", "09_report"]  # the README; math and tables; figures


@pytest.fixture(scope="session")
def site_build(report_runs, tmp_path_factory):
    "`race site` on the micro grid (validated against itself) with three chapters, by the fallback renderer: (site folder, the command's output)."
    out = tmp_path_factory.mktemp("site") / "_site"
    race = str(Path(sys.executable).with_name("race"))
    res = subprocess.run([race, "site", str(report_runs), "--out", str(out), "--renderer", "fallback", "--full", str(report_runs),
                          "--chapters", *SITE_CHAPTERS, "--workers", "2"], capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return out, res.stdout


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    "GSM8K and MATH-500 from the shared folder, and a small training file in Polaris-53K's format (problem, answer)."
    require_data("gsm8k", "test.jsonl")
    d = tmp_path_factory.mktemp("data")
    for name in ("gsm8k", "math500"): (d / name).symlink_to(SHARED / name)
    (d / "polaris").mkdir()
    rows = [json.loads(l) for l in (SHARED / "math500" / "test.jsonl").read_text().splitlines()[:64]]
    (d / "polaris" / "train.jsonl").write_text("".join(json.dumps(dict(problem=r["problem"], answer=r["answer"])) + "\n" for r in rows))
    old = os.environ.get("RACE_DATA_DIR")
    os.environ["RACE_DATA_DIR"] = str(d)
    yield d
    if old is None: os.environ.pop("RACE_DATA_DIR", None)
    else: os.environ["RACE_DATA_DIR"] = old
