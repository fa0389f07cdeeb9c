"""race_nb benchmarks: `make bench` runs this and writes bench/RESULTS.md.

Every number below is measured in this run on this machine; nothing is typed in. Timings use
time.perf_counter around whole calls; FLOPs come from the ledger (checked against
FlopCounterMode in the tests and, for the generation paths, again here).
RACE_BENCH_QUICK=1 makes a short smoke run; RACE_BENCH_E2E=0 skips the end-to-end section;
RACE_BENCH_RUNS points at the runs root whose finished grids are timed (default: runs/).
"""
import contextlib, json, os, platform, statistics, subprocess, sys, tempfile, time
from pathlib import Path

import torch

OUT = Path(__file__).with_name("RESULTS.md")
ROOT = Path(__file__).resolve().parents[1]
QUICK = os.environ.get("RACE_BENCH_QUICK") == "1"  # fewer repeats, for a smoke run
E2E = os.environ.get("RACE_BENCH_E2E", "1") == "1"
RUNS = Path(os.environ.get("RACE_BENCH_RUNS", ROOT / "runs"))  # where grids already run are timed from
SIZES = ("tiny-s", "tiny-m", "tiny-l")
WORK = Path(tempfile.mkdtemp(prefix="race_bench_"))


def machine() -> dict:
    return dict(python=platform.python_version(), torch=torch.__version__, threads=torch.get_num_threads(),
                cores=os.cpu_count(), cpu=platform.processor() or platform.machine(), load=os.getloadavg()[0])


def _timed(fn) -> float:
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0


@contextlib.contextmanager
def torch_threads(n: int | None):
    "torch's intra-op threads set to `n` for the block (None: unchanged), restored after it."
    old = torch.get_num_threads()
    if n: torch.set_num_threads(n)
    try: yield
    finally: torch.set_num_threads(old)


def peak_flops(n: int = 1024, reps: int = 10, threads: int | None = None) -> float:
    "Measured fp32 matmul FLOP/s (best of `reps`): the machine's practical peak."
    with torch_threads(threads):
        a, b = torch.randn(n, n), torch.randn(n, n)
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(reps))
    return 2 * n ** 3 / best


def _cfg(model="tiny-s", steps=20, fast=True):
    from race_nb.config import CellConfig
    return CellConfig(model=model, arm="n8-m8", budget=1e15, max_steps=steps, seed=0, fast_generation=fast)


def _plain(steps):
    "trl's own GRPOTrainer on the cell (its generate, no ledger)."
    from trl import GRPOTrainer
    from race_nb.build import trainer_parts
    from transformers.trainer_callback import PrinterCallback
    tr = GRPOTrainer(**trainer_parts(_cfg(steps=steps), WORK / "trl"))
    tr.remove_callback(PrinterCallback)  # no per-step log printing (the ledgered trainer prints none either)
    return tr


def _ledgered(steps, fast, model="tiny-s"):
    from race_nb.build import build_trainer
    return build_trainer(_cfg(model, steps, fast), WORK / "trl")


def interleaved(make_a, make_b, pairs: int) -> dict:
    "Wall times of A and B run interleaved A B A B ...; ratio = B / A per pair."
    ta, tb = [], []
    for _ in range(pairs):
        ta.append(_timed(make_a().train)); tb.append(_timed(make_b().train))
    r = [b / a for a, b in zip(ta, tb)]
    return dict(pairs=pairs, median_ratio=statistics.median(r), min_ratio=min(r), max_ratio=max(r),
                a_median_s=statistics.median(ta), b_median_s=statistics.median(tb))


def _user_run():
    "tests/test_dropin.py's plain-trl-shaped script (toy Qwen2.5 policy, a rule callable, a declared PRM, a trl-loaded judge)."
    import importlib.util
    spec = importlib.util.spec_from_file_location("test_dropin", ROOT / "tests" / "test_dropin.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    return mod.user_run


def dropin_overhead(pairs: int, steps: int) -> dict:
    "A user's own trl script, plain GRPOTrainer vs the drop-in (wall ratio), and the drop-in's own bookkeeping time measured directly."
    import warnings
    from trl import GRPOTrainer
    from race_nb import charge, grpo, flops
    user_run = _user_run()
    os.environ.setdefault("RACE_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    spent = [0.0]
    def timed(owner, name):
        orig = getattr(owner, name)
        def f(*a, **k):
            t0 = time.perf_counter()
            try: return orig(*a, **k)
            finally: spent[0] += time.perf_counter() - t0
        setattr(owner, name, f)
        return orig
    targets = [(flops.FlopsLedger, "record"), (grpo, "ledger_logs"), (charge.ModelCharge, "_pre"), (charge.ModelCharge, "_post"),
               (grpo.LedgerGRPOTrainer, "_record_generation"), (grpo.LedgerGRPOTrainer, "floating_point_ops")]
    args = dict(args=dict(max_steps=steps, save_strategy="no"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ov = interleaved(lambda: user_run(WORK / "plain", cls=GRPOTrainer, **args),
                         lambda: user_run(WORK / "dropin", report_card=False, **args), pairs)
        origs = [timed(o, n) for o, n in targets]
        try:
            tr = user_run(WORK / "dropin", report_card=False, **args)
            wall = _timed(tr.train)
        finally:
            for (o, n), f in zip(targets, origs): setattr(o, n, f)
    return dict(ov, steps=steps, bookkeeping_s=spent[0], wall_s=wall, bookkeeping_share=spent[0] / wall,
                logged=sorted(k for k in tr.state.log_history[-2] if k.startswith(("flops/", "mfu/"))))


def same_seed(steps: int) -> dict:
    "The ledgered cell with trl's generate and with fast generation, same seed: ledger FLOPs and per-step rewards."
    runs = {}
    for fast in (False, True):
        tr = _ledgered(steps, fast)
        tr.train()
        runs[fast] = (tr.ledger.total, [h["reward"] for h in tr.state.log_history if "reward" in h])
    (f0, r0), (f1, r1) = runs[False], runs[True]
    return dict(steps=steps, flops_trl=f0, flops_fast=f1, flops_equal=f0 == f1,
                max_reward_diff=max(abs(a - b) for a, b in zip(r0, r1)), reward_steps=len(r0))


GEN_TOKENS = 48  # generation benchmarks: new tokens forced per prompt


def lora_policy(name: str, **lora) -> tuple:
    "(tiny policy `name` with a r=16 LoRA on every linear, 64 padded prompts, the ledger's FLOPs for generating GEN_TOKENS from them)."
    from peft import LoraConfig, get_peft_model
    from race_nb.flops import LINEARS, LoraSpec, ModelFlops
    from race_nb.models import char_tokenizer, tiny_model
    enc = char_tokenizer()(["Q 12+3-4:", "Q 1+2:", "Q 99-9+81-1:", "Q 5-3:"] * 16, return_tensors="pt", padding=True)
    m = get_peft_model(tiny_model(name), LoraConfig(r=16, lora_alpha=32, target_modules=list(LINEARS), lora_dropout=0.0, **lora)).eval()
    return m, enc, ModelFlops.from_config(m.config.to_dict(), lora=LoraSpec(16, LINEARS)).generate(*enc["input_ids"].shape, GEN_TOKENS)


def generation_only(reps: int = 5) -> list:
    "transformers' generate vs fast_generate on a LoRA policy: 64 prompts, 48 new tokens (no EOS stop), best of `reps`."
    from race_nb.fastgen import fast_generate
    from race_nb.flop_check import count_flops
    rows, T = [], GEN_TOKENS
    for name in SIZES:
        m, enc, flops = lora_policy(name)
        hf = lambda: m.generate(**enc, max_new_tokens=T, min_new_tokens=T, do_sample=True, top_k=0, top_p=1.0, pad_token_id=0)
        fast = lambda: fast_generate(m, enc["input_ids"], enc["attention_mask"], T, None, 0, do_sample=True)
        hf(); fast()
        t_hf, t_fast = (min(_timed(f) for _ in range(reps)) for f in (hf, fast))
        _, counted = count_flops(fast)
        rows.append(dict(model=name, hf_s=t_hf, fast_s=t_fast, speedup=t_hf / t_fast, hf_ms_per_token=t_hf / T * 1e3,
                         fast_ms_per_token=t_fast / T * 1e3, fast_flops_per_s=flops / t_fast, counted_over_ledger=counted / flops))
    return rows


def generation_bounds(reps: int = 3, compile_decode: bool = True) -> list:
    """What is left in generation, one thread (a grid cell's share), tiny-s, 64 prompts x 48 tokens, LoRA r=16, sampling:
    our decoder against two changes of what runs - LoRA merged into the weights, and torch.compile of the decode step."""
    from race_nb import fastgen
    from race_nb.flop_check import count_flops
    m, enc, ledger = lora_policy("tiny-s", init_lora_weights=False)  # random B: merging changes the weights
    def gen():
        torch.manual_seed(0)
        return fastgen.fast_generate(m, enc["input_ids"], enc["attention_mask"], GEN_TOKENS, None, 0, do_sample=True)
    def row(path, first_s=None):
        out = gen()
        secs = min(_timed(gen) for _ in range(reps))
        return dict(path=path, ms=secs * 1e3, first_call_s="-" if first_s is None else first_s, same_tokens=bool(torch.equal(out, ref)),
                    counted_over_ledger=count_flops(gen)[1] / ledger if first_s is None else float("nan"))
    with torch_threads(1):
        ref = gen()
        rows = [row("ours (LoRA unmerged, eager)")]
        m.merge_adapter()
        rows.append(row("LoRA merged into the weights"))
        m.unmerge_adapter()
        if compile_decode:
            run = fastgen.FastDecoder.run
            comp = torch.compile(run, dynamic=True)
            fastgen.FastDecoder.run = lambda self, *a: comp(self, *a)
            try:
                first = _timed(gen)
                rows.append(row("decode step compiled (torch.compile, dynamic shapes)", first))
            finally:
                fastgen.FastDecoder.run = run
                torch._dynamo.reset()
    for r in rows: r["speedup"] = rows[0]["ms"] / r["ms"]
    return rows


def throughput(steps: int, peak: float, fast: bool) -> list:
    "Per tiny policy: wall time and achieved FLOP/s per phase, from the ledger's events."
    rows = []
    for model in SIZES:
        tr = _ledgered(steps, fast, model)
        wall = _timed(tr.train)
        ev = tr.ledger.to_frame()
        gen, upd = ev[ev.phase == "generate"], ev[ev.phase == "update"]
        row = dict(model=model, path="fast" if fast else "trl", step_s=wall / steps, gen_s=gen.seconds.sum(), update_s=upd.seconds.sum(),
                   gen_tokens_per_s=gen.useful_tokens.sum() / gen.seconds.sum(),
                   update_tokens_per_s=upd.useful_tokens.sum() / upd.seconds.sum(),
                   gen_flops_per_s=gen.flops.sum() / gen.seconds.sum(), update_flops_per_s=upd.flops.sum() / upd.seconds.sum(),
                   total_flops_per_s=tr.ledger.total / wall, flops=tr.ledger.total)
        row["other_s"] = wall - row["gen_s"] - row["update_s"]
        row["mfu_gen"], row["mfu_update"], row["mfu_total"] = (row["gen_flops_per_s"] / peak, row["update_flops_per_s"] / peak,
                                                               row["total_flops_per_s"] / peak)
        row["gen_time_share"], row["gen_flop_share"] = row["gen_s"] / wall, gen.flops.sum() / tr.ledger.total
        rows.append(row)
    return rows


def profile_step(model: str = "tiny-s") -> str:
    "torch.profiler summary of three GRPO steps (top operators by self CPU time)."
    from torch.profiler import profile, ProfilerActivity
    tr = _ledgered(3, True, model)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        tr.train()
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12)


def cell_overhead(reps: int, threads: int = 1) -> dict:
    "One grids/tiny.yaml cell (tiny-s, sparse, n8-m8, n_eval 200) at a small budget through papermill, cold vs warm kernels interleaved: where its wall time goes."
    import yaml
    from race_nb.kernels import run_notebook
    from race_nb.grid import template_path
    from race_nb.kernels import warm_kernels
    saved = {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    os.environ.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))  # what a cell gets with 2 workers on 2 cores
    params = dict(model="tiny-s", reward="sparse", arm="n8-m8", budget=3e10, seed=0, n_eval=200)
    runs = {"cold": [], "warm": []}
    def one(mode, i):
        d = WORK / "overhead" / f"{mode}{i}"; d.mkdir(parents=True)
        (d / "params.yaml").write_text(yaml.safe_dump(params))
        t0 = time.perf_counter()
        with open(d / "cell.log", "w") as log:
            nb = run_notebook(template_path(), d / "out.ipynb", dict(params_file=str(d / "params.yaml"), output_dir=str(d)), d,
                              stdout_file=log, stderr_file=log)
        wall = time.perf_counter() - t0
        dur = {"".join(c.source): c.metadata.papermill.duration for c in nb.cells if c.cell_type == "code"}
        pick = lambda key: sum(v for k, v in dur.items() if key in k)
        m = json.loads((d / "metrics.json").read_text())
        drop = ("train_seconds", "eval_seconds", "versions", "config")
        runs[mode].append(dict(wall=wall, imports=pick("from race_nb.cell import"), train=pick("train_cell(cfg"),
                               finish=pick("finish_cell(cfg"), kernel=wall - sum(dur.values()),
                               result={k: v for k, v in m.items() if k not in drop}))
    __import__("papermill")  # the driver pays its own papermill import before the first timing
    try:
        for i in range(reps):
            one("cold", i)
            with warm_kernels(threads=threads): one("warm", i)
    finally:  # later sections (the end-to-end runs) see the caller's environment again
        for v, val in saved.items():
            if val is None: os.environ.pop(v, None)
            else: os.environ[v] = val
    def summary(rs):
        med = lambda k: statistics.median(r[k] for r in rs)
        out = {k: med(k) for k in ("wall", "imports", "train", "finish", "kernel")}
        out["overhead"] = statistics.median(r["wall"] - r["train"] for r in rs)
        return out
    same = all(r["result"] == runs["cold"][0]["result"] for r in runs["cold"] + runs["warm"])
    return dict(reps=reps, threads=threads, cold=summary(runs["cold"]), warm=summary(runs["warm"]), same_results=same)


def _race(*args, cwd=None) -> float:
    t0 = time.perf_counter()
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    subprocess.run([str(Path(sys.executable).with_name("race")), *args], check=True, cwd=cwd, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def end_to_end() -> dict:
    "Wall time of `race demo` (fresh runs folder, warm starts cached) and of one grids/tiny.yaml cell per size (papermill, 1 worker)."
    import yaml
    grid = dict(name="one-per-size", fixed=dict(n_eval=200), axes=dict(model=list(SIZES), reward=["sparse"], arm=["n8-m8"]),
                budgets=[1.2e12], seeds=[0])
    gpath = WORK / "one.yaml"
    gpath.write_text(yaml.safe_dump(grid))
    _race("grid", "run", str(gpath), "--runs", str(WORK / "runs"), "--workers", "1")
    cells = {}
    for st in (WORK / "runs" / "one-per-size").glob("*/status.json"):
        p = yaml.safe_load((st.parent / "params.yaml").read_text())
        cells[p["model"]] = json.loads(st.read_text())["wall_seconds"]
    demo = _race("demo", "--runs", str(WORK / "demo_runs"), "--workers", "2", cwd=WORK)
    return dict(cells=cells, demo_s=demo)


def measured_grid(name: str) -> dict | None:
    "Timings of a grid already run under runs/<name> (status.json of every cell)."
    d = RUNS / name
    sts = {p.parent: json.loads(p.read_text()) for p in d.glob("*/status.json")} if d.exists() else {}
    done = {c: s for c, s in sts.items() if s.get("status") == "done" and "wall_seconds" in s}
    if not done: return None
    starts = lambda c: sum(l.startswith("start") for l in (c / "attempts.log").read_text().splitlines()) if (c / "attempts.log").exists() else 1
    first = [s for c, s in done.items() if starts(c) == 1]  # a cell run again later (--retry-failed) would stretch the span
    return dict(cells=len(sts), done=len(done), first=len(first), span_s=max(s["end"] for s in first) - min(s["start"] for s in first),
                cell_s=sum(s["wall_seconds"] for s in first), workers=len({s.get("pid") for s in first}))


def race_economy() -> list:
    "Pilot FLOPs as a fraction of the full tiny grid's, from the grids' budgets."
    from race_nb.grid import load_grid
    full = load_grid(ROOT / "grids" / "tiny.yaml")
    ff = sum(c["params"]["budget"] for c in full["cells"])
    rows = []
    for n in ("demo", "tiny-pilot"):
        g = load_grid(ROOT / "grids" / f"{n}.yaml")
        pf = sum(c["params"]["budget"] for c in g["cells"])
        rows.append(dict(pilot=n, cells=len(g["cells"]), pilot_flops=pf, full_flops=ff, fraction=pf / ff))
    return rows


def table(rows, cols, fmt=None) -> str:
    fmt = fmt or {}
    head = "| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n"
    return head + "".join("| " + " | ".join(fmt.get(c, "{:.3g}" if isinstance(r[c], float) else "{}").format(r[c]) for c in cols) + " |\n"
                          for r in rows)


KEYS = ("m", "peak", "peak1", "steps", "pairs", "ov", "dov", "sp", "ss", "go", "tp_steps", "tp_before", "tp_after", "tp_one", "gb", "prof",
        "co", "eco", "e2e", "grids")  # what `measure` returns and `render` writes up


def measure() -> dict:
    "Run every benchmark; return the numbers (what `render` writes up)."
    m = machine()
    peak, peak1 = peak_flops(), peak_flops(threads=1)
    steps, pairs = (5, 2) if QUICK else (40, 5)
    print("ledger overhead ...", flush=True)
    ov = interleaved(lambda: _plain(steps), lambda: _ledgered(steps, fast=False), pairs)
    print("drop-in overhead ...", flush=True)
    dov = dropin_overhead(2 if QUICK else 5, 4 if QUICK else 10)
    print("fast generation ...", flush=True)
    sp = interleaved(lambda: _plain(steps), lambda: _ledgered(steps, fast=True), pairs)
    ss = same_seed(5 if QUICK else 20)
    go = generation_only(2 if QUICK else 5)
    print("throughput ...", flush=True)
    tp_steps = 5 if QUICK else 20
    tp_before = throughput(tp_steps, peak, fast=False)
    tp_after = throughput(tp_steps, peak, fast=True)
    with torch_threads(1): tp_one = throughput(tp_steps, peak1, fast=True)  # one thread: what a grid cell gets with 2 workers on 2 cores
    print("generation bounds ...", flush=True)
    gb = generation_bounds(2 if QUICK else 3, compile_decode=not QUICK)
    prof = profile_step()
    print("per-cell overhead ...", flush=True)
    co = cell_overhead(2 if QUICK else 3)
    eco = race_economy()
    e2e = end_to_end() if E2E and not QUICK else None
    grids = {n: measured_grid(n) for n in ("tiny-pilot", "tiny", "demo")}
    return {k: v for k, v in locals().items() if k in KEYS}


def _projection(gb: list, tp_one: list, tp_steps: int, grid: dict | None) -> str:
    "tiny-s's one-thread step if generation ran at each path's speed, and the tiny grid scaled by the same factor (optimistic)."
    one = next(x for x in tp_one if x["model"] == "tiny-s")
    rest = (one["update_s"] + one["other_s"]) / tp_steps
    now = one["step_s"]
    cases = [(r["path"], rest + one["gen_s"] / tp_steps / r["speedup"]) for r in gb[1:]] + [("generation free", rest)]
    lines = [f"tiny-s's one-thread step is {now * 1e3:.0f} ms: generation {one['gen_s'] / tp_steps * 1e3:.0f} ms, update "
             f"{one['update_s'] / tp_steps * 1e3:.0f} ms, the rest {one['other_s'] / tp_steps * 1e3:.0f} ms. With generation at "
             "each path's speed:\n"]
    for name, step in cases:
        g = f"; the tiny grid at most ~{grid['span_s'] / 60 * step / now:.0f} min" if grid else ""
        lines.append(f"- {name}: {step * 1e3:.0f} ms per step ({now / step:.2f}x){g}")
    if grid:
        need = now * 40 * 60 / grid["span_s"] - rest  # generation time per step that would put the scaled grid at 40 min
        lines.append(f"- 40 min would need generation at {max(need, 0) * 1e3:.0f} ms per step, "
                     + (f"{one['gen_s'] / tp_steps / need:.1f}x faster than ours" if need > 0 else "out of reach even with free generation"))
        lines.append(f"\n(grid: the measured {grid['span_s'] / 60:.1f} min scaled by the step ratio, as if every cell were "
                          "all steps and sped up like tiny-s's: an optimistic bound. Goal <= 40 min.)")
    return "\n".join(lines) + "\n"


def render(r: dict, seconds: float) -> str:
    "bench/RESULTS.md from the numbers of `measure`."
    m, peak, peak1, steps, pairs, ov, dov, sp, ss, go, tp_steps, tp_before, tp_after, tp_one, gb, prof, co, eco, e2e, grids = (r[k] for k in KEYS)
    ours = next(x for x in tp_after if x["model"] == "tiny-s")
    trl_step = sp["a_median_s"] / steps  # plain trl's step: the median of the interleaved runs, steadier than one throughput run
    ceiling = trl_step / (ours["update_s"] / tp_steps)  # plain trl's step over our update phase alone
    md = [f"# race_nb benchmarks\n\nGenerated by `make bench` ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{seconds:.0f} s). Machine: {m['cores']} cores ({m['cpu']}), torch {m['torch']}, {m['threads']} threads, "
          f"Python {m['python']}, 1-minute load average at the start {m['load']:.2f} (other work on the machine slows every number). Trainer benchmarks run tiny-s, arm n8-m8 (8 prompts x 8 rollouts, mu = 1), seed 0, "
          f"{steps} steps unless stated; every timing is wall-clock (`time.perf_counter`) in this run.\n",
          f"## Peak\n\nfp32 matmul 1024x1024, best of 10: **{peak / 1e9:.1f} GFLOP/s** with {m['threads']} threads "
          f"({peak1 / 1e9:.1f} with 1 thread, what a grid cell gets with 2 workers). MFU below = achieved / the {m['threads']}-thread peak.\n",
          f"## Ledger overhead\n\ntrl's `GRPOTrainer` vs `LedgerGRPOTrainer(fast_generation=False)` (both generate with trl's path; "
          f"the difference is the ledger), interleaved A B x {ov['pairs']}; ratio = ledgered / plain wall time.\n\n"
          f"median **{ov['median_ratio']:.3f}** (min {ov['min_ratio']:.3f}, max {ov['max_ratio']:.3f}); plain median "
          f"{ov['a_median_s']:.1f} s, ledgered {ov['b_median_s']:.1f} s. Goal <= 1.03.\n",
          f"### In a user's own trl script\n\n`tests/test_dropin.py`'s script (toy Qwen2.5 policy with LoRA q/v, conversational "
          f"prompts, a rule callable, a callable running its own PRM, a reward model trl loads, gradient checkpointing, mu = 2, "
          f"beta = 0.04), {dov['steps']} steps: trl's `GRPOTrainer` vs `LedgerGRPOTrainer`, interleaved A B x {dov['pairs']}: "
          f"wall ratio median **{dov['median_ratio']:.3f}** (min {dov['min_ratio']:.3f}, max {dov['max_ratio']:.3f}); plain "
          f"{dov['a_median_s']:.2f} s, drop-in {dov['b_median_s']:.2f} s. Measured directly (timers around the ledger's "
          f"own functions: recording, forward hooks, log records, `floating_point_ops`): **{dov['bookkeeping_s'] * 1e3:.1f} ms "
          f"of {dov['wall_s']:.2f} s = {dov['bookkeeping_share']:.2%}** of the run. Goal <= 3%. Keys added to each log "
          f"record: {', '.join(dov['logged'])}.\n",
          "## Acting on it: fast generation\n\nAt the tiny scale the GRPO step was mostly Python overhead in generation "
          "(~60% of the time for ~30% of the FLOPs: ~130 module calls per token). `race_nb.fastgen.fast_generate` runs the same "
          "decoder as plain tensor code (fused q/k/v and gate/up matmuls, LoRA kept unmerged, preallocated KV cache) and is used "
          "for rollouts and evaluation wherever it reproduces trl's generate.\n",
          "### Generation alone (64 prompts, 48 tokens forced, LoRA r=16, sampling; best of 5)\n",
          table(go, ["model", "hf_s", "fast_s", "speedup", "hf_ms_per_token", "fast_ms_per_token", "fast_flops_per_s", "counted_over_ledger"]),
          "\n`counted_over_ledger` = FlopCounterMode's count of the fast path / `ModelFlops.generate`: the ledger counts the "
          "same arithmetic as before.\n",
          f"### Whole cell, before/after\n\ntrl's `GRPOTrainer` vs `LedgerGRPOTrainer` (fast generation, ledger on), interleaved "
          f"A B x {sp['pairs']}: wall ratio median **{sp['median_ratio']:.3f}** (min {sp['min_ratio']:.3f}, max {sp['max_ratio']:.3f}); "
          f"plain {sp['a_median_s']:.1f} s, ours {sp['b_median_s']:.1f} s, i.e. **{1 / sp['median_ratio']:.2f}x** the FLOP/s of plain trl "
          f"on the same cell.\n\nSame seed, trl's generate vs fast generation ({ss['steps']} steps): ledger FLOPs "
          f"{ss['flops_trl']:.6g} vs {ss['flops_fast']:.6g} (equal: {ss['flops_equal']}); largest difference of the per-step mean "
          f"reward over {ss['reward_steps']} steps: {ss['max_reward_diff']:.3g} (the sampler reproduces trl's draws, so results "
          f"are not merely within seed noise but the same run).\n",
          "## Throughput per tiny policy (before: trl's generate; after: fast generation)\n\n"
          f"Arm n8-m8, {tp_steps} steps each; phase times "
          "from the ledger's events (generation: the rollout call; update: the training step minus generation and scoring); "
          "achieved FLOP/s = ledger FLOPs / phase time; MFU = achieved / peak.\n",
          table(tp_before + tp_after, ["model", "path", "step_s", "gen_s", "update_s", "other_s", "gen_tokens_per_s",
                                       "update_tokens_per_s", "gen_flops_per_s", "update_flops_per_s", "mfu_gen", "mfu_update",
                                       "mfu_total", "gen_time_share", "gen_flop_share"]),
          f"\nThe same, fast generation, **one thread** (a grid cell's share with 2 workers on 2 cores; MFU against the 1-thread "
          f"peak {peak1 / 1e9:.1f} GFLOP/s):\n\n" +
          table(tp_one, ["model", "step_s", "gen_s", "update_s", "other_s", "gen_flops_per_s", "update_flops_per_s", "mfu_gen",
                         "mfu_update", "mfu_total", "gen_time_share"]) +
          f"\nThe update phase (trl's own forward and backward, which race_nb does not replace) bounds the ratio to plain trl: "
          f"tiny-s's update alone takes {ours['update_s'] / tp_steps * 1e3:.0f} ms per step against plain trl's whole step of "
          f"{trl_step * 1e3:.0f} ms (median of the {sp['pairs']} interleaved runs above), so even free generation and bookkeeping would give at most **{ceiling:.1f}x** "
          f"(goal 2.5x).\n",
          "## What generation could still give (one thread, tiny-s)\n\n"
          "Generation alone (64 prompts, 48 tokens forced, LoRA r=16, sampling; best of several calls after a first one), "
          "our decoder against two changes of the arithmetic that runs: LoRA merged into the weights (the rollouts would no "
          "longer run the LoRA FLOPs the ledger charges, nor reproduce trl's draws bit for bit) and `torch.compile` of the "
          "decode step (fused elementwise kernels; *first_call_s* includes compiling, paid again in every cell's fresh "
          "process). *same_tokens*: the same completions as ours from the same seed.\n\n" +
          table(gb, ["path", "ms", "speedup", "first_call_s", "same_tokens", "counted_over_ledger"]) +
          "\n" + _projection(gb, tp_one, tp_steps, grids.get("tiny")) + "\n",
          "\n## Where three steps' time goes (tiny-s, fast generation, torch.profiler)\n\n```\n" + prof + "\n```\n",
          "## Per-cell overhead: cold and warm kernels\n\n"
          f"One `grids/tiny.yaml` cell (tiny-s, sparse, n8-m8, n_eval 200) at a 3e10 budget, run with papermill on the cell "
          f"template, {co['threads']} thread (a cell's share with 2 workers on 2 cores), cold and warm kernels interleaved x {co['reps']}, "
          "medians. Phases from papermill's per-cell durations: *kernel* = wall minus every notebook cell (kernel start, "
          "papermill, shutdown); *imports* = the template's import cell; *finish* = evaluation and writing the results; "
          "overhead = wall minus the training cell. Warm kernels are forked from `race_nb.kernels`' server, which `race grid run` "
          "starts once per grid.\n\n" + table([dict(kernels=k, **co[k]) for k in ("cold", "warm")],
                                                   ["kernels", "wall", "kernel", "imports", "train", "finish", "overhead"]) +
          f"\nOverhead per cell: **{co['cold']['overhead']:.1f} s cold, {co['warm']['overhead']:.1f} s warm** (goal <= 4 s). "
          f"Every run's metrics.json (timings and versions aside) identical, cold or warm: {co['same_results']}.\n",
          "## RACE economy\n\n" + table(eco, ["pilot", "cells", "pilot_flops", "full_flops", "fraction"]) +
          "\n(pilot budgets / the 120 cells of `grids/tiny.yaml` at 1.2e12 FLOPs.)\n"]
    md.append("## End-to-end\n")
    if e2e:
        md.append(f"- `race demo` (8 cells at 3e11, 2 workers, fresh runs folder, warm starts and scorers cached, report "
                  f"rendered): **{e2e['demo_s']:.0f} s**\n" + "".join(
                      f"- one `grids/tiny.yaml` cell ({mdl}, sparse, n8-m8, 1.2e12 FLOPs, n_eval 200, papermill, 1 worker with "
                      f"{m['threads']} threads): {s:.0f} s\n" for mdl, s in sorted(e2e["cells"].items())))
        mean = statistics.mean(e2e["cells"].values())
        md.append(f"- projected `grids/tiny.yaml` (120 cells, sparse-reward cell times; model-based rewards cost more): "
                  f"~{120 * mean / 60:.0f} min on one worker, ~{120 * mean / 2 / 60:.0f} min with 2 workers on 2 cores, "
                  f"~{120 * mean / 16 / 60:.0f} min with 16\n")
    else:
        md.append("- skipped (RACE_BENCH_E2E=0 or quick run)\n")
    for n, g in grids.items():
        if g: md.append(f"- measured `{n}` grid run: {g['done']}/{g['cells']} cells done, first start to last end "
                        f"**{g['span_s'] / 60:.1f} min** with {g['workers']} workers (sum of cell wall times {g['cell_s'] / 60:.1f} min)"
                        + (f"; timed over the {g['first']} cells done at their first attempt, {g['done'] - g['first']} ran again later"
                           if g['first'] < g['done'] else "") + "\n")
    md.append("## The test suite\n\nHow long `make test` takes, per test and per notebook: `bench/SUITE.md`, written by `make bench-suite` "
              "(bench/suite.py), which runs the suite itself.\n")
    return "\n".join(md)


def main():
    t0 = time.time()
    r = measure()
    OUT.write_text(render(r, time.time() - t0))
    print(OUT.read_text())


if __name__ == "__main__":
    main()
