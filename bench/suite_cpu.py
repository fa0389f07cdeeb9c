"""A pytest plugin for bench/suite.py: the machine's busy CPU seconds while each test ran (setup + call + teardown).

Read from /proc/stat (user + nice + system + irq + softirq) before and after each test, over all cores, or under pytest-xdist
over the worker's own pinned cores (tests/conftest.py), so the CPU of the subprocesses, kernels and Slurm jobs a test starts
counts too; on a machine doing nothing else that is the test's own.
A test whose CPU seconds are near (cores x wall seconds) kept every core busy: only less work makes it faster. One whose CPU
is far below its wall time waits (on Slurm, a kernel's start, a sleep) and could run beside another test.
Written as JSON lines to the file named by RACE_SUITE_CPU_LOG; does nothing without it (or without /proc/stat)."""
import json, os, time
from pathlib import Path

import pytest

LOG = os.environ.get("RACE_SUITE_CPU_LOG")
STAT = Path("/proc/stat")


def busy_seconds(cores=None) -> float:
    "CPU seconds the machine's cores (or only `cores`, by number) have spent busy since boot."
    rows = [l.split() for l in STAT.read_text().splitlines() if l.startswith("cpu")]
    want = {"cpu"} if cores is None else {f"cpu{c}" for c in cores}
    return sum(int(f[1]) + int(f[2]) + int(f[3]) + int(f[6]) + int(f[7]) for f in rows if f[0] in want) / os.sysconf("SC_CLK_TCK")


def own_cores():
    "Under pytest-xdist with pinned workers (tests/conftest.py) the worker's own cores: a test's CPU is then its worker's, not the other's."
    return sorted(os.sched_getaffinity(0)) if os.environ.get("PYTEST_XDIST_WORKER") and hasattr(os, "sched_getaffinity") else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not LOG or not STAT.exists():
        yield; return
    cores = own_cores()
    c0, t0 = busy_seconds(cores), time.time()
    yield
    with open(LOG, "a") as f:
        f.write(json.dumps(dict(test=item.nodeid, cpu=round(busy_seconds(cores) - c0, 2), wall=round(time.time() - t0, 2),
                                worker=os.environ.get("PYTEST_XDIST_WORKER"), cores=cores)) + "\n")
