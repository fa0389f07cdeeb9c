"""race_nb benchmarks: `make bench` runs this and writes bench/RESULTS.md.

Every number below is measured in this run on this machine; nothing is typed in. Timings use
time.perf_counter around whole calls; FLOPs come from the ledger (checked against
FlopCounterMode in the tests).
"""
import json, os, platform, statistics, sys, time
from pathlib import Path

import torch

OUT = Path(__file__).with_name("RESULTS.md")
QUICK = os.environ.get("RACE_BENCH_QUICK") == "1"  # fewer repeats, for a smoke run


def machine() -> dict:
    return dict(python=platform.python_version(), torch=torch.__version__, threads=torch.get_num_threads(),
                cores=os.cpu_count(), cpu=platform.processor() or platform.machine())


def peak_flops(n: int = 1024, reps: int = 10) -> float:
    "Measured fp32 matmul FLOP/s (best of `reps`): the machine's practical peak."
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n ** 3 / best


def _timed(fn) -> float:
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0


def overhead(pairs: int, steps: int) -> dict:
    "Plain trl GRPOTrainer vs the ledgered trainer on the same cell (same seed, arm, steps), interleaved A B A B."
    from trl import GRPOTrainer
    from race_nb.grpo import CellConfig, build_trainer, trainer_parts
    cfg = CellConfig(model="tiny-s", arm="n8-m8", budget=1e15, max_steps=steps, seed=0)
    ratios, plain_t, ledger_t = [], [], []
    for _ in range(pairs):
        ta = _timed(GRPOTrainer(**trainer_parts(cfg, "/tmp/race_bench")).train)
        tb = _timed(build_trainer(cfg, "/tmp/race_bench").train)
        plain_t.append(ta); ledger_t.append(tb); ratios.append(tb / ta)
    return dict(pairs=pairs, steps=steps, median_ratio=statistics.median(ratios), min_ratio=min(ratios), max_ratio=max(ratios),
                plain_median_s=statistics.median(plain_t), ledger_median_s=statistics.median(ledger_t))


def throughput(steps: int, peak: float) -> list:
    "Per tiny policy: wall time and achieved FLOP/s per phase, from the ledger's events."
    from race_nb.grpo import CellConfig, build_trainer
    rows = []
    for model in ("tiny-s", "tiny-m", "tiny-l"):
        tr = build_trainer(CellConfig(model=model, arm="n8-m8", budget=1e15, max_steps=steps, seed=0), "/tmp/race_bench")
        wall = _timed(tr.train)
        ev = tr.ledger.to_frame()
        gen, upd = ev[ev.phase == "generate"], ev[ev.phase == "update"]
        row = dict(model=model, steps=steps, wall_s=wall, step_s=wall / steps,
                   gen_s=gen.seconds.sum(), update_s=upd.seconds.sum(),
                   gen_tokens_per_s=gen.useful_tokens.sum() / gen.seconds.sum(),
                   update_tokens_per_s=upd.useful_tokens.sum() / upd.seconds.sum(),
                   gen_flops_per_s=gen.flops.sum() / gen.seconds.sum(), update_flops_per_s=upd.flops.sum() / upd.seconds.sum(),
                   total_flops_per_s=tr.ledger.total / wall)
        row["other_s"] = wall - row["gen_s"] - row["update_s"]
        row["mfu_gen"], row["mfu_update"], row["mfu_total"] = (row["gen_flops_per_s"] / peak, row["update_flops_per_s"] / peak,
                                                               row["total_flops_per_s"] / peak)
        row["gen_time_share"], row["gen_flop_share"] = row["gen_s"] / wall, gen.flops.sum() / tr.ledger.total
        rows.append(row)
    return rows


def profile_step(model: str = "tiny-s") -> str:
    "torch.profiler summary of one GRPO step (top operators by self CPU time)."
    from race_nb.grpo import CellConfig, build_trainer
    tr = build_trainer(CellConfig(model=model, arm="n8-m8", budget=1e15, max_steps=3, seed=0), "/tmp/race_bench")
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tr.train()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)


def race_economy() -> dict:
    "Pilot FLOPs (grids/demo.yaml) as a fraction of the full tiny grid's (grids/tiny.yaml), from the grids' budgets."
    from race_nb.grid import load_grid
    from race_nb.core import project_root
    d, t = (load_grid(project_root() / "grids" / f"{n}.yaml") for n in ("demo", "tiny"))
    pilot, full = (sum(c["params"]["budget"] for c in g["cells"]) for g in (d, t))
    return dict(pilot_cells=len(d["cells"]), pilot_flops=pilot, full_cells=len(t["cells"]), full_flops=full, fraction=pilot / full)


def table(rows, cols, fmt=None) -> str:
    fmt = fmt or {}
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(fmt.get(c, "{}").format(r[c]) for c in cols) + " |\n" for r in rows)


def main():
    t0 = time.time()
    m = machine()
    peak = peak_flops()
    steps = 5 if QUICK else 20
    ov = overhead(2 if QUICK else 5, steps)
    tp = throughput(steps, peak)
    prof = profile_step()
    eco = race_economy()
    cell_s = {r["model"]: r["step_s"] for r in tp}
    md = [f"# race_nb benchmarks\n\nGenerated by `make bench` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{time.time() - t0:.0f} s). Machine: {m['cores']} cores ({m['cpu']}), torch {m['torch']}, {m['threads']} threads, "
          f"Python {m['python']}.\n",
          f"## Peak\n\nfp32 matmul 1024x1024, best of 10: **{peak / 1e9:.1f} GFLOP/s** (MFU denominators below).\n",
          f"## Ledger overhead\n\nThe same tiny-s cell (arm n8-m8, seed 0, {ov['steps']} steps) with trl's `GRPOTrainer` and "
          f"with `LedgerGRPOTrainer`, run interleaved A B x {ov['pairs']}; ratio = ledgered / plain wall time.\n\n"
          f"median **{ov['median_ratio']:.3f}** (min {ov['min_ratio']:.3f}, max {ov['max_ratio']:.3f}); plain median "
          f"{ov['plain_median_s']:.1f} s, ledgered {ov['ledger_median_s']:.1f} s. Goal <= 1.03.\n",
          "## Throughput per tiny policy\n\nArm n8-m8 (8 prompts x 8 rollouts), "
          f"{steps} steps each; phase times from the ledger's events (generation: trl's `_generate`; update: the training step "
          "minus generation and scoring); achieved FLOP/s = ledger FLOPs / phase time; MFU = achieved / peak.\n",
          table(tp, ["model", "step_s", "gen_s", "update_s", "other_s", "gen_tokens_per_s", "update_tokens_per_s",
                     "gen_flops_per_s", "update_flops_per_s", "mfu_gen", "mfu_update", "mfu_total", "gen_time_share", "gen_flop_share"],
                {k: "{:.3g}" for k in ["step_s", "gen_s", "update_s", "other_s", "gen_tokens_per_s", "update_tokens_per_s",
                                        "gen_flops_per_s", "update_flops_per_s", "mfu_gen", "mfu_update", "mfu_total",
                                        "gen_time_share", "gen_flop_share"]}),
          "\n## Where one step's time goes (tiny-s, torch.profiler, 3 steps)\n\n```\n" + prof + "\n```\n",
          f"## RACE economy\n\nPilot `grids/demo.yaml`: {eco['pilot_cells']} cells, {eco['pilot_flops']:.3g} budgeted FLOPs; "
          f"full `grids/tiny.yaml`: {eco['full_cells']} cells, {eco['full_flops']:.3g}. Pilot / full = **{eco['fraction']:.2%}**.\n",
          "## Projected full tiny grid\n\n" + "".join(
              f"- {mdl}: {cell_s[mdl]:.2f} s/step here; a 1.2e12-FLOP cell is ~{1.2e12 / next(r for r in tp if r['model'] == mdl)['total_flops_per_s'] / 60:.1f} min of training\n"
              for mdl in cell_s)]
    per_cell = sum(1.2e12 / r["total_flops_per_s"] for r in tp) / len(tp) * 40  # 40 cells per size
    md.append(f"\nTraining time of the 120-cell tiny grid on one worker: ~{per_cell / 60:.0f} min (evaluation and papermill start-up not included); "
              f"with N workers on N free cores divide by N.\n")
    OUT.write_text("\n".join(md))
    print(OUT.read_text())


if __name__ == "__main__":
    main()
