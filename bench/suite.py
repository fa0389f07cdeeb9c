"""How long `make test` takes and where the time goes: `make bench-suite` runs this and writes bench/SUITE.md and bench/suite.json.

It runs what `make test` runs - `nbdev_test` (every notebook, OMP/MKL on one thread, as the Makefile does) and pytest over
tests/ (serial, or `--workers N` with pytest-xdist) - times each, and keeps every test's duration (setup + call + teardown,
from pytest's `--durations=0`) and every notebook's (nbdev_test's `--timing`). When bench/suite.json already holds a run,
or `--before LOG` names a saved pytest output, SUITE.md compares the two per test. What is skipped here (Slurm, Chromium,
tmux, Quarto when they are absent) is listed, since CI runs some of those too.
"""
import argparse, json, os, platform, re, subprocess, sys, time
from pathlib import Path

import suite_cpu  # bench/suite_cpu.py: the pytest plugin that adds each test's CPU seconds

ROOT = Path(__file__).resolve().parents[1]
OUT, DATA = Path(__file__).with_name("SUITE.md"), Path(__file__).with_name("suite.json")
BIN = Path(sys.executable).parent
GROUP = re.compile(r"@\w+$")
DURATION = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(.+?)\s*$")


def pytest_durations(text: str) -> dict:
    "Seconds per test id (setup + call + teardown) from pytest's `--durations=0` lines."
    out = {}
    for line in text.splitlines():
        if (m := DURATION.match(line)):
            name = GROUP.sub("", m.group(3))  # under --dist loadgroup a grouped test's id ends in @group
            out[name] = out.get(name, 0.0) + float(m.group(1))
    return out


def summary_lines(text: str) -> list[str]:
    "pytest's closing lines ('110 passed, 3 skipped, ... in 528.37s'), one per pytest run in text."
    lines = [l.strip("= ") for l in text.splitlines() if re.search(r"\b(passed|failed|skipped|deselected)\b.* in [0-9.]+s", l)]
    return lines or ["no summary (pytest did not finish)"]


def summary_line(text: str) -> str:
    return summary_lines(text)[-1]


REFERENCE = """
import time, torch
torch.set_num_threads(1)
a, best = torch.randn(512, 512, generator=torch.Generator().manual_seed(0)), []
for _ in range(3):
    t = time.perf_counter(); s = 0
    for i in range(2_000_000): s += i
    for _ in range(50): a @ a
    best.append(time.perf_counter() - t)
print(min(best))
"""


def reference_seconds() -> float | None:
    "The machine's speed on one core: a fixed Python loop (2e6 additions) and 50 float32 512x512 matmuls on one torch thread, best of 3, "
    "in seconds. Suite times from two machines compare only through it (the same commit ran 2-3x apart on machines of this kind)."
    p = subprocess.run([sys.executable, "-c", REFERENCE], capture_output=True, text=True)
    return round(float(p.stdout.strip()), 3) if p.returncode == 0 else None


def machine() -> dict:
    cpu = next((l.split(":", 1)[1].strip() for l in Path("/proc/cpuinfo").read_text().splitlines() if l.startswith("model name")), platform.processor()) \
        if Path("/proc/cpuinfo").exists() else platform.processor()
    return dict(cpus=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(), cpu=cpu, python=platform.python_version(),
                reference_s=reference_seconds())


def run(cmd: list, env: dict) -> tuple[float, str, int]:
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return time.time() - t0, p.stdout + p.stderr, p.returncode


def commit() -> str:
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return p.stdout.strip() or "unknown"


def measure(workers: int, nbtest: bool) -> dict:
    "As `make test`: nbdev_test, then pytest's main part, then the Slurm tests alone."
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "RACE_DATA_DIR": os.environ.get("RACE_DATA_DIR", str(ROOT.parent / "shared" / "data"))}
    r = dict(commit=commit(), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), machine=machine(), workers=workers,
             slurm=subprocess.run(["sh", "-c", "sinfo -h -o %T 2>/dev/null | grep -q idle"]).returncode == 0,
             chromium=any((Path(d) / "chromium").exists() for d in os.environ.get("PATH", "").split(":")),
             tmux=any((Path(d) / "tmux").exists() for d in os.environ.get("PATH", "").split(":")))
    busy = lambda: suite_cpu.busy_seconds() if suite_cpu.STAT.exists() else None
    if nbtest:
        c0 = busy()
        secs, text, rc = run([str(BIN / "nbdev_test"), "--timing"], {**env, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"})
        r["nbtest"] = dict(seconds=secs, ok=rc == 0, cpu_seconds=busy() - c0 if c0 is not None else None,
                           notebooks={m.group(1): float(m.group(2)) for m in re.finditer(r"^(\S+\.ipynb): (\d+) secs", text, re.M)})
        print(f"nbdev_test: {secs:.0f} s ({'ok' if rc == 0 else 'FAILED'})", flush=True)
    base = [str(BIN / "python"), "-m", "pytest", "-q", "--durations=0", "-p", "no:cacheprovider", "-p", "suite_cpu", "tests"]
    phases = [(base + ["-m", "not slurm"] + (["-n", str(workers), "--dist", "loadgroup"] if workers else []), {}),
              (base + ["-m", "slurm"], {"RACE_TEST_OWN_SERVERS": "1"})]  # as the Makefile: the Slurm tests alone, after the rest
    cpu_log = Path(os.environ.get("TMPDIR", "/tmp")) / f"race-suite-cpu-{os.getpid()}.jsonl"
    cpu_log.unlink(missing_ok=True)
    c0 = busy()
    secs, text, rc, main = 0.0, "", 0, None
    for cmd, extra in phases:
        s_, t_, rc_ = run(cmd, {**env, **extra, "RACE_SUITE_CPU_LOG": str(cpu_log),
                                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "bench"), env.get("PYTHONPATH")]))})
        secs, text, rc, main = secs + s_, text + t_, rc or rc_, s_ if main is None else main
    cpu = {GROUP.sub("", d["test"]): d["cpu"] for d in map(json.loads, cpu_log.read_text().splitlines())} if cpu_log.exists() else {}
    r["pytest"] = dict(seconds=secs, main_seconds=main, ok=rc == 0, summary=" + ".join(summary_lines(text)), tests=pytest_durations(text),
                       cpu=cpu, cpu_seconds=busy() - c0 if c0 is not None else None)
    print(f"pytest: {secs:.0f} s - {r['pytest']['summary']}", flush=True)
    return r


DECISIONS = """## How the suite is run, and why (measured in session 14, on 2 cores, with bench/suite.py at the commits named)

- pytest-xdist, one worker per core, each pinned to its own core (tests/conftest.py): with `--before` the serial run at d056e44 on
  the same machine (bench/suite-d056e44.json), the main part went from 701 s serial (1.53 cores busy) to 398 s (1.89 busy) at
  6e5f92f. Unpinned workers had been measured slower than serial (session 12): each heavy test's grid ran two workers on both cores.
- pytest-xdist 3.8 under pytest 9 ignored `xdist_group`: every group's fixture was built once per worker (the micro grid twice);
  tests/conftest.py marks groups on the field pytest 9 reads.
- The Slurm tests run alone, after the rest: their jobs are not pinned with a worker, and beside a worker's heavy tests the
  time-limited cell once missed its 15 minutes (CI of session 12).
- nbdev_test beside pytest's main part was measured slower, not faster: 685 s from start to end against 621 s one after the
  other (100689b, whose suite.py could run them side by side, against 6e5f92f), the cores about as busy (1.90) but the same
  work taking longer; `make test` runs them in turn, and suite.py no longer offers the side-by-side run.

## Session 15: a slower machine, and what was cut

- Machines of one kind differ: the suite at 3a7d2a9 ran in 628 s (session 14), at e76f028 (the same code and tests; only
  test_slurm's time parser changed) in 1257 s on session 15's machine (bench/suite-e76f028-s15.json); d056e44 in 669 s (session 13)
  and 1068 s (session 14). SUITE.md now states the machine's speed on a fixed one-core workload (`REFERENCE`), so that two suites can
  be compared through it. It is a rough guide: on session 15's machine it read 0.38 s at one moment and 0.49-0.52 s at another.
- RACE's bootstraps (`diagnose`'s fit-regime confidence, `bootstrap_validation`) resample arrays, not a table per resample, and the
  size ordering no longer imports the trainer: 08_race under nbdev_test 127 s -> 50 s on session 15's machine, its tables identical
  (compared with `DataFrame.equals` on the shipped results/race-* tables and on synthetic grids before and after).
- A cell draws each arithmetic split once per process, and collects garbage only where something was released (a full collection
  costs ~0.3 s with torch loaded): about 1 s less per cell there.

## Session 19: parents that imported trl, and a same-machine before/after

- `from trl import GRPOTrainer` costs 6.4-6.8 s of CPU on 2 cores. `race grid run` / `plan` / `pilot` parents paid it (6-9 s each,
  about 14 in the main part) because planning imported `race_nb.grpo` for the arm FLOPs; they now come from `race_nb.arm_flops`,
  which imports no trainer: `race grid plan` 5.85 s -> 0.70 s CPU (rule-based grid), 2.44 s (hf PRM grid).
- Kill tests start their own kernel server only for the run they kill; the SIGKILL test's cells and the resident-memory test run at
  the smallest budget their checks need (1.5e10: 6.6 cycles; 6e10: 3+ cycles); the template test's kernel forks from the warm server.
- Before/after on one machine, 20 min apart: 3be6bb2 main part 526 s, Slurm 164 s (bench/suite-3be6bb2-s19.json) against 2fc0180
  main 406 s, Slurm 140 s (bench/suite-2fc0180-s19.json). Nine untouched tests ran 12.9% slower in the 3be6bb2 run, so about 466 s
  -> 406 s is the change's share. The bound of 6 min is not met: the suite is CPU-bound (1.84-1.87 of 2 cores busy), nbdev_test
  (about 100 s) and the Slurm tests (100-160 s) leave under 2 min for a main part of about 720 test-seconds of training and evaluation.

## Session 20: in-run evaluations that no check reads

- cProfile of one micro-grid cell (tiny-s, n8-m8, 3e10, 17 steps, warm process): train_cell 9.2 s, of which the 8 milestone
  evaluations (`MilestoneEval.on_step_end`) 2.55 s, rollout generation 2.7 s, loss and backward about 1.9 s; evaluation 0.9 s. Generation
  is per-call overhead (about 1 ms per layer per token at batch 10), not arithmetic.
- The grids whose checks read no learning curve run with `milestones: 0`: conftest's micro grid (grid, report and site tests),
  test_grid's micro grids, the dead-reward grids. test_milestones, the resume group and the Slurm test keep 8 (their ledgers are
  compared across a kill or requeue, milestone evaluations included). On those tests alone (2 xdist workers, same machine, minutes
  apart): 166 s -> 136 s; the micro fixture 72 -> 47 s, the SIGKILL test 58 -> 40 s, the dead-reward test 40 -> 32 s.
"""


def render(r: dict, before: dict | None) -> str:
    m, pt = r["machine"], r["pytest"]
    total = pt["seconds"] + r.get("nbtest", {}).get("seconds", 0)
    lines = ["# The test suite: measured", "",
             f"Written by `make bench-suite` (bench/suite.py) at commit {r['commit']}, {r['date']}, on {m['cpus']} usable cores "
             f"({m['cpu']}), Python {m['python']}, with the environment built. pytest {'serial' if not r['workers'] else 'on %d xdist workers' % r['workers']}. "
             "Times are wall-clock seconds; a test's time is its setup + call + teardown, so a shared fixture counts in the first test "
             "that asks for it.", "",
             (f"- nbdev_test (every notebook, in parallel): **{r['nbtest']['seconds']:.0f} s**" if "nbtest" in r
              else "- nbdev_test: not run (--no-nbtest)"),
             f"- pytest: **{pt['seconds']:.0f} s** ({pt['summary']})" + (f"; its main part {pt['main_seconds']:.0f} s, the Slurm tests "
                                                                        f"{pt['seconds'] - pt['main_seconds']:.0f} s" if pt.get("main_seconds") else ""),
             *([f"- CPU: pytest kept {pt['cpu_seconds'] / pt['seconds']:.2f} of {m['cpus']} cores busy on average"
                + (f", nbdev_test {r['nbtest']['cpu_seconds'] / r['nbtest']['seconds']:.2f}" if r.get("nbtest", {}).get("cpu_seconds") else "")
                + " (busy CPU seconds from /proc/stat over wall seconds). A test's **CPU s** is the busy seconds, all its processes "
                "included, of its pytest worker's own cores (workers are pinned), or of every core when serial"]
               if pt.get("cpu_seconds") else []),
             f"- together: **{total:.0f} s** ({total / 60:.1f} min); `make test` adds the export and clean checks (seconds)",
             *([f"- machine speed: the reference workload (bench/suite.py `REFERENCE`: one core) took **{m['reference_s']:.2f} s** here"
                + (f"; {before['machine']['reference_s']:.2f} s on the machine of the run compared with" if (before or {}).get("machine", {}).get("reference_s") else "")]
               if m.get("reference_s") else []),
             f"- here: Slurm {'running' if r['slurm'] else 'not running (its two tests skip; CI starts one)'}, "
             f"Chromium {'found' if r['chromium'] else 'absent'}, tmux {'found' if r['tmux'] else 'absent'}", ""]
    b = (before or {}).get("pytest", {}).get("tests", {})
    if before:
        lines += [f"Compared with the run before (commit {before.get('commit', '?')}, {before.get('date', '?')}: pytest "
                  f"{before['pytest']['seconds']:.0f} s, {before['pytest'].get('summary', '')}"
                  + (f"; nbdev_test {before['nbtest']['seconds']:.0f} s; together {before['pytest']['seconds'] + before['nbtest']['seconds']:.0f} s"
                     if "nbtest" in before else "") + ").", ""]
    tests = sorted(pt["tests"].items(), key=lambda kv: -kv[1])
    cpu = pt.get("cpu", {})
    lines += ["| test | seconds | CPU s |" + (" before | change |" if b else ""), "|---|---:|---:|" + ("---:|---:|" if b else "")]
    for name, s in tests[:30]:
        row = f"| `{name}` | {s:.1f} | {cpu[name]:.0f} |" if name in cpu else f"| `{name}` | {s:.1f} | - |"
        if b: row += (f" {b[name]:.1f} | {s - b[name]:+.1f} |" if b.get(name, 0) >= 0.05 else " - | new, or skipped before |")
        lines.append(row)
    if b:
        gone = sorted((n for n in set(b) - set(pt["tests"]) if b[n] >= 1), key=lambda n: -b[n])  # pytest omits durations under 5 ms
        lines += ["", f"Tests of 1 s or more in the run before and not in this one (renamed, merged or removed): {', '.join(f'`{n}` ({b[n]:.0f} s)' for n in gone) or 'none'}."]
    rest = sum(s for _, s in tests[30:])
    lines += ["", f"The other {max(0, len(tests) - 30)} tests: {rest:.0f} s together.", ""]
    if "nbtest" in r:
        nbs = sorted(r["nbtest"]["notebooks"].items(), key=lambda kv: -kv[1])
        lines += ["| notebook (nbdev_test) | seconds |", "|---|---:|"] + [f"| {n} | {s:.0f} |" for n, s in nbs[:12]] + [""]
    return "\n".join(lines) + "\n" + DECISIONS


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    ap.add_argument("--workers", type=int, default=int(os.environ.get("PYTEST_WORKERS") or (min(cores, 4) if cores >= 2 else 0)),
                    help="pytest-xdist workers (0: serial; default as the Makefile: one per usable core, at most 4)")
    ap.add_argument("--no-nbtest", action="store_true", help="time pytest only")
    ap.add_argument("--before", help="a saved pytest output (with --durations=0), or a suite.json kept from an earlier run, to compare against instead of bench/suite.json")
    ap.add_argument("--before-label", default=None, help="what --before was run on (e.g. its commit)")
    ap.add_argument("--render-only", action="store_true", help="rewrite SUITE.md from bench/suite.json (and --before) without running anything")
    a = ap.parse_args()
    before = json.loads(DATA.read_text()) if DATA.exists() and not a.render_only else None
    if a.before and a.before.endswith(".json"):  # a suite.json kept from an earlier run
        before = json.loads(Path(a.before).read_text())
    elif a.before:
        text = Path(a.before).read_text()
        m = re.search(r" in ([0-9.]+)s", summary_line(text))
        before = dict(commit=a.before_label or Path(a.before).name, date="saved output", pytest=dict(seconds=float(m.group(1)) if m else 0.0,
                      summary=summary_line(text), tests=pytest_durations(text)))
    if a.render_only:
        OUT.write_text(render(json.loads(DATA.read_text()), before)); print(OUT.read_text()); return
    r = measure(a.workers, not a.no_nbtest)
    OUT.write_text(render(r, before))
    DATA.write_text(json.dumps(r, indent=1) + "\n")
    print(OUT.read_text())
    sys.exit(0 if r["pytest"]["ok"] and r.get("nbtest", {}).get("ok", True) else 1)


if __name__ == "__main__":
    main()
