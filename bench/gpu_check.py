"""GPU smoke test of the paper path (issues 13, 26, 52, 62, 65), in stages. Each stage runs in a subprocess of its own with its own
timeout and writes its own JSON into the output folder as it measures, so one crash or timeout loses nothing else. One loan
(15 minutes, 2-4 of them start-up, 10 a command) runs two commands, each under 300 s with the install, with room to rerun one
(bench/GPU.md gives them as typed):

  command 1 (`--command 1`): P, then D;   command 2 (`--command 2`): G, then S1.

P   probe: torch / transformers / peft / trl versions, an import of every module the check runs (gpu_bundle.CHECKED_IMPORTS:
    a missing carried package fails here, in seconds), whether vllm imports, free GPU memory, and the kernel SDPA picks for a
    masked grouped-query decode step (what transformers' path runs);
D   decode-step time per generation path at the real Qwen2.5-7B then 1.5B widths (random bf16 weights on the device, LoRA r
    64), batch 256, contexts 512 and 2048: race_nb.fastgen eager, with its decode step captured as CUDA graphs, graphs with the
    adapter merged, the SDPA attention variant (a KV head's query heads as SDPA's query positions: no K/V repeat, no
    mask-forced fallback), and transformers' forward with a DynamicCache (trl's path); 3 warm-up steps, 10 timed (CUDA
    events), one profiled (torch.profiler set up for graph replays as gpt-fast does: the kernel split by kind, the top
    kernels); every row has the capture's status and the roofline's time for the ideal bytes at the GPU's spec bandwidth.
    Written to DIR/decode.json row by row as measured; `race grid plan` reads the efficiency of the rows cells run
    (race_nb.roofline.measured_efficiency);
G   fast generation's peak memory at the paper cell's 7B shape (256 rows of 512-token prompts, 16 rollouts per prompt stored
    once, 2048 new tokens, LoRA r 64, random bf16 weights: rows never stop) against race_nb.memory's plan for it, each figure
    written as it is measured: allocated after the weights, after the prefill, and at the end, with the seconds;
S1  the paper grid's worst cell: one GRPO cycle at qwen2.5-7b / prm / n16-m4 shapes (16 prompts x 16 rollouts, LoRA r 64,
    gradient checkpointing, 16 micro-batches) with random bf16 weights built from the shipped configs on the device (no
    download, no weight file written); peak allocated and reserved memory after generation, after scoring and after the
    update, against race_nb.memory's prediction at the prompt length the batch had and the completion length it ran.
    Random weights never stop early, so every rollout runs to the limit: 256 x 2048 tokens did not finish in 255 s on an H200
    (bench/GPU.md). S1 therefore runs at --s1-completion tokens (default 512), and the plan is held to it at that length
    (the plan's 2048-token figure is COMPUTED, checked by stage G and by the fake-tensor trace of bench/memory_trace.py);
S2  CUDA bookkeeping: the CUDA random stream unchanged across an evaluation (sampled generate and a milestone evaluation), and
    a 2-cell tiny grid through papermill on the GPU (one cell in the CPU rehearsal), a cell asked to checkpoint and stop
    (checkpoint.request), then resumed;
S3  the ledger against FlopCounterMode on the GPU: Qwen2.5-1.5B's shape with random weights, the real PRM format, one cycle
    (trl's non-Triton log-prob path, which FlopCounterMode can see; fast generation's graphs are off under it), then the
    same cycle with SDPA, timed.

    python bench/gpu_check.py [--out-dir DIR] [--command 1|2] [--stages P D G S1 S2 S3] [--s1-completion N] [--smoke]

The summary (DIR/gpu_check.json, and bench/gpu_check.json by default) keeps S1's measured cycle as `big_cycle` and G's
memory. Without CUDA it exits with status 2 and says so; `--smoke` runs every stage on the CPU at toy shapes
(tests/test_paper.py runs it), into a temporary folder unless --out-dir names one (bench/gpu_check/ keeps what GPUs
measured). On a bare GPU machine with no network, `make gpu-bundle` gathers the wheels and data it needs into gpu-bundle/
(bench/GPU.md). Data (GSM8K / MATH-500) is found in RACE_DATA_DIR, else in gpu-bundle/data or ../shared/data beside the
project."""
import argparse, collections, contextlib, dataclasses, json, os, subprocess, sys, tempfile, threading, time, traceback
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
H200_PEAK = 989e12  # bf16 dense FLOP/s of an H100/H200 SXM (the same tensor cores)
STAGES = {"P": 30, "D": 170, "G": 90, "S1": 150, "S2": 150, "S3": 80}  # seconds each stage may take on one GPU (its own timeout)
COMMANDS = {"1": ["P", "D"], "2": ["G", "S1"]}  # the two commands of one loan (bench/GPU.md): 200 s and 240 s of stages, under 300 s each with the install
PARTIAL = {}  # what a stage has measured so far: written out after each phase, so a stage stopped at its limit still reports it
SMOKE_TIMEOUT = 600  # a stage's timeout on the CPU (toy shapes, two slow cores)


def find_data() -> Path:
    "RACE_DATA_DIR, else gpu-bundle/data, else ../shared/data beside the project; set RACE_DATA_DIR for everything the check starts."
    for cand in (os.environ.get("RACE_DATA_DIR"), ROOT / "gpu-bundle" / "data", ROOT.parent / "shared" / "data"):
        if cand and (Path(cand) / "gsm8k" / "test.jsonl").exists():
            os.environ["RACE_DATA_DIR"] = str(Path(cand).resolve())
            return Path(cand).resolve()
    sys.exit("gpu_check: no GSM8K / MATH-500 data: set RACE_DATA_DIR to a folder with gsm8k/ and math500/ "
             f"(looked in RACE_DATA_DIR={os.environ.get('RACE_DATA_DIR')!r}, {ROOT / 'gpu-bundle' / 'data'}, {ROOT.parent / 'shared' / 'data'})")


@contextlib.contextmanager
def non_triton():
    "trl's torch fallback for its chunked log-prob kernels: the Triton kernels fold logit tiles elementwise, which "
    "FlopCounterMode cannot see; the GEMMs around them are the same torch calls either way, and counted."
    import trl.kernels.chunked_logprob as cl
    old = cl._TRITON_AVAILABLE
    cl._TRITON_AVAILABLE = False
    try: yield
    finally: cl._TRITON_AVAILABLE = old


def weightless(config_name: str, folder: Path, arch: str | None = None) -> Path:
    "A checkpoint folder with a shipped config (architecture `arch`) and the toy Qwen2.5 tokenizer, and no weights: inside "
    "`random_weights` it loads as random bf16 weights built on the device."
    from race_nb.flops import load_config
    from race_nb.toy import toy_checkpoint
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(toy_checkpoint("qwen2.5-1.5b"))
    c = {k: v for k, v in load_config(config_name).items() if k not in ("torch_dtype", "transformers_version", "auto_map")}
    c.update(vocab_size=max(c["vocab_size"], len(tok)), pad_token_id=tok.pad_token_id)
    if arch: c["architectures"] = [arch]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(c, indent=2))
    tok.save_pretrained(folder)
    return folder


@contextlib.contextmanager
def random_weights(device: str):
    "Inside: `from_pretrained` of a folder without weight files builds the model from its config with random bf16 weights on "
    "`device`, and so does race_nb's PRM loader (the Qwen2.5-Math-PRM format: decoder + two-layer score head)."
    import torch, transformers
    import race_nb.rewards.prm as prm
    from transformers import AutoConfig, PreTrainedModel
    orig, orig_prm = PreTrainedModel.from_pretrained.__func__, prm.load_process_reward_model
    empty = lambda p: Path(str(p)).is_dir() and not any(Path(str(p)).glob("*.safetensors")) and not any(Path(str(p)).glob("*.bin"))

    def build(cls, config, dtype):
        old = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            with torch.device(device): return cls(config)
        finally: torch.set_default_dtype(old)

    def from_pretrained(cls, path, *args, **kw):
        if not empty(path): return orig(cls, path, *args, **kw)
        config = AutoConfig.from_pretrained(path)
        if kw.get("attn_implementation"): config._attn_implementation = kw["attn_implementation"]
        return build(cls, config, kw.get("dtype") if isinstance(kw.get("dtype"), torch.dtype) else torch.bfloat16).eval()

    def load_prm(source, dtype=None, attn_implementation=None):
        if not empty(source): return orig_prm(source, dtype=dtype, attn_implementation=attn_implementation)
        cfg = AutoConfig.from_pretrained(source)
        dt, h = dtype if isinstance(dtype, torch.dtype) else torch.bfloat16, cfg.hidden_size
        head = build(lambda c: torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, cfg.num_labels or 2)), cfg, dt)
        return prm.Qwen2ProcessRewardModel(build(transformers.Qwen2Model, cfg, dt), head).eval()

    PreTrainedModel.from_pretrained = classmethod(from_pretrained)
    prm.load_process_reward_model = load_prm
    try: yield
    finally:
        PreTrainedModel.from_pretrained = classmethod(orig)
        prm.load_process_reward_model = orig_prm


def _mem(torch, cuda: bool) -> dict:
    return dict(allocated_gib=torch.cuda.max_memory_allocated() / 2**30, reserved_gib=torch.cuda.max_memory_reserved() / 2**30) if cuda else {}


def _partial(**kw):
    PARTIAL.update(kw)
    if PARTIAL.get("_file"): Path(PARTIAL["_file"]).write_text(json.dumps({k: v for k, v in PARTIAL.items() if k != "_file"}, indent=2, default=float) + "\n")


def _predicted(cfg, prompt_len: int, phase: str) -> float:
    "race_nb.memory's peak for one phase of a cell (resident parts + the phase), GiB."
    from race_nb.memory import cell_memory
    plan = cell_memory(cfg, prompt_len=prompt_len)
    return sum(plan[k] for k in ("policy_weights", "lora_state", "reward_weights", "workspace", phase))


S1_COMPLETION = 512  # S1's completion length on a GPU (tokens): 256 rollouts of it fit the stage's limit; the paper's is 2048


def stage_s1(cuda: bool, tmp: Path) -> dict:
    "The worst cell's one GRPO cycle: seconds, FLOP/s, and peak memory per phase against race_nb.memory's prediction."
    import torch
    from race_nb.config import CellConfig
    from race_nb.build import build_trainer
    from race_nb.memory import cell_memory
    if cuda:
        policy, prm = weightless("qwen2.5-7b", tmp / "policy7b"), weightless("qwen2.5-math-prm-7b", tmp / "prm7b", "Qwen2ForProcessRewardModel")
        shape = dict(max_completion_length=int(os.environ.get("RACE_S1_COMPLETION", S1_COMPLETION)), prompts_per_step=16, micro_batches=16)
    else: policy, prm, shape = "toy:qwen2.5-7b", "toy:qwen-prm", dict(max_completion_length=16, prompts_per_step=4, micro_batches=2)
    cfg = CellConfig(model="qwen2.5-7b", model_path=str(policy), reward="prm", arm="n16-m4", budget=1e20, max_steps=1, seed=0,
                     reward_settings=dict(backend="hf", path=str(prm), require_answer=False),  # random text states no answer: score it anyway
                     train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test", gradient_checkpointing=True,
                     lora_r=64, lora_alpha=128, judge_settings=dict(backend="hf", path="toy:judge"), **shape)
    marks, t = {}, {}
    with (random_weights("cuda") if cuda else contextlib.nullcontext()):
        t0 = time.time()
        tr = build_trainer(cfg, tmp / "trl7b")
        t["build"] = time.time() - t0
        _partial(build_seconds=t["build"], build_peak=_mem(torch, cuda))
        gen, score = tr._generate, tr._calculate_rewards

        def timed_generate(prompts):
            if cuda: torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
            out = gen(prompts)
            if cuda: torch.cuda.synchronize()
            marks["generation"] = dict(_mem(torch, cuda), prompt_len=max(len(p) for p in out[0]), completion_len=max(len(c) for c in out[1]),
                                       rollouts=len(out[1]), chunk=tr.generation_chunk, seconds=time.time() - t0)
            _partial(marks=marks, predicted_generation_gib=_predicted(cfg, marks["generation"]["prompt_len"], "generation"))
            if cuda: torch.cuda.reset_peak_memory_stats()
            return out

        def timed_score(*a, **k):
            out = score(*a, **k)
            if cuda: torch.cuda.synchronize()
            marks["scoring"] = dict(_mem(torch, cuda), seconds=time.time() - t0)
            _partial(marks=marks)
            if cuda: torch.cuda.reset_peak_memory_stats()
            return out

        tr._generate, tr._calculate_rewards = timed_generate, timed_score
        t0 = time.time()
        tr.train()
        if cuda: torch.cuda.synchronize()
        t["cycle"] = time.time() - t0
        marks["update"] = _mem(torch, cuda)
    plan = cell_memory(cfg, prompt_len=marks["generation"]["prompt_len"])
    predicted = {ph: _predicted(cfg, marks["generation"]["prompt_len"], ph) for ph in ("generation", "scoring", "update")}
    ev = tr.ledger.to_frame()
    gen_s = float(ev[(ev.component == "search") & (ev.phase == "generate")].seconds.sum())
    g = marks["generation"]
    paper = cell_memory(dataclasses.replace(cfg, max_completion_length=2048), prompt_len=g["prompt_len"]) if cuda else None  # COMPUTED: the paper's length
    return dict(shape=f"qwen2.5-7b{'' if cuda else ' (toy)'} / prm / n16-m4: {cfg.prompts_per_step} prompts x 16 rollouts, completion "
                      f"{cfg.max_completion_length}, LoRA r 64, gradient checkpointing, {cfg.micro_batches} micro-batches",
                marks=marks, predicted_gib=predicted, plan=plan, plan_at_2048_computed=paper,
                ratio_measured_to_predicted={ph: marks[ph]["allocated_gib"] / predicted[ph] for ph in predicted} if cuda else None,
                seconds=t, cycle_seconds=t["cycle"], cycle_flops=tr.ledger.total, flops_per_s=tr.ledger.total / t["cycle"],
                mfu=tr.ledger.total / t["cycle"] / H200_PEAK if cuda else None, generation_seconds=gen_s,
                generated_tokens=g["rollouts"] * g["completion_len"], steps=tr.state.global_step)


def stage_s2(cuda: bool, tmp: Path) -> dict:
    "The CUDA random stream across an evaluation; a 2-cell grid on the device with a checkpoint request and a resume."
    import torch, yaml
    from race_nb.models import generate, load_policy
    from race_nb.data import load_spec
    from race_nb.grid import grid_status, run_grid
    from race_nb.checkpoint import CHECKPOINT_REQUEST
    out = {}
    dev = "cuda" if cuda else "cpu"
    model, tok = load_policy("qwen2.5-1.5b", "toy:qwen2.5-1.5b", device=dev)
    qs = [tok.apply_chat_template([{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True)
          for r in load_spec("gsm8k:test")[:8]]
    state = lambda: (torch.cuda.get_rng_state() if cuda else torch.get_rng_state()).clone()
    torch.manual_seed(11)
    s0 = state()
    generate(model, tok, qs, max_new_tokens=16, greedy=False, seed=3)  # an evaluation's sampled completions
    generate(model, tok, qs, max_new_tokens=16, greedy=True)  # a milestone's greedy pass@1
    out["rng_unchanged"] = bool(torch.equal(s0, state()))
    out["rng_device"] = "cuda" if cuda else "cpu"
    _partial(**out)
    del model
    # the grid: two tiny cells on the device; one is asked to checkpoint and stop once it has a checkpoint, then the grid resumes it
    grid = tmp / "gpu-grid.yaml"
    grid.write_text(yaml.safe_dump(dict(name="gpu-grid", fixed=dict(n_eval=16 if cuda else 8, eval_max_new_tokens=32, prompts_per_step=4, milestones=2),
                                        axes=dict(model=["tiny-s"], arm=["n8-m8"]), budgets=[6e10 if cuda else 1.5e10], seeds=[0, 1] if cuda else [0],
                                        checkpoint=dict(steps=2, minutes=None))))
    root, asked = tmp / "runs" / "gpu-grid", []
    from race_nb.grid import GridError
    from race_nb.grid.spec import check_kernel
    try: check_kernel("race_nb")
    except GridError:  # a bare GPU machine: the cells' kernel, installed into this stage's folder (nothing written outside it)
        subprocess.run([sys.executable, "-m", "ipykernel", "install", "--prefix", str(tmp / "jk"), "--name", "race_nb"], check=True, capture_output=True)
        os.environ["JUPYTER_PATH"] = str(tmp / "jk" / "share" / "jupyter")
        out["kernel_installed"] = str(tmp / "jk")

    def ask():  # the first cell with a complete checkpoint is asked to stop (as Slurm's warning does through the job)
        deadline = time.time() + 300
        while time.time() < deadline and not asked:
            for d in (root.iterdir() if root.exists() else []):
                if d.is_dir() and list((d / "trl").glob("checkpoint-*/ledger.parquet")):
                    (d / CHECKPOINT_REQUEST).touch(); asked.append(d.name); return
            time.sleep(0.2)

    th = threading.Thread(target=ask, daemon=True); th.start()
    t0 = time.time()
    run_grid(grid, runs_root=tmp / "runs", workers=1, min_cycles=0, warm_kernels=not cuda)  # the CPU rehearsal: the tests' warm kernels
    first = grid_status(root)
    _partial(**out, after_first_run=first.status.value_counts().to_dict(), asked_cell=asked[0] if asked else None)
    run_grid(grid, runs_root=tmp / "runs", workers=1, min_cycles=0, warm_kernels=not cuda)  # the rerun resumes the stopped cell
    st = grid_status(root)
    out["grid_seconds"] = time.time() - t0
    out["asked_cell"] = asked[0] if asked else None
    out["after_first_run"] = first.status.value_counts().to_dict()
    out["after_resume"] = st.status.value_counts().to_dict()
    rec = json.loads((root / asked[0] / "trained.json").read_text()) if asked and (root / asked[0] / "trained.json").exists() else {}
    out["resumed_from"] = rec.get("resumed_from")
    out["cell_errors"] = [str(e)[-600:] for e in st.error.dropna().unique()[:2]]
    out["ok"] = bool(out["rng_unchanged"] and (st.status == "done").all() and asked and rec.get("resumed_from"))
    return out


def stage_s3(cuda: bool, tmp: Path) -> dict:
    "Ledger against FlopCounterMode over one cycle (eager attention, trl's non-Triton log-prob path), then the same cycle with SDPA, timed."
    from race_nb.build import whole_step_check
    from race_nb.config import Arm
    if cuda:
        policy = weightless("qwen2.5-1.5b", tmp / "policy")
        prm = weightless("qwen2.5-1.5b", tmp / "prm", "Qwen2ForProcessRewardModel")  # the real PRM format at the 1.5B shape
        comp, prompts = 256, 8
    else: policy, prm, comp, prompts = "toy:qwen2.5-1.5b", "toy:qwen-prm", 16, 4
    cell = dict(model="qwen2.5-1.5b", model_path=str(policy), train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test",
                reward="prm", reward_settings=dict(backend="hf", path=str(prm), attn_implementation="eager", require_answer=False),
                judge_settings=dict(backend="hf", path="toy:judge", require_answer=False), max_completion_length=comp,
                prompts_per_step=prompts, micro_batches=2, gradient_checkpointing=True, lora_r=64, lora_alpha=128)
    arm = Arm("check", n=4, m=4, mu=2)
    with (random_weights("cuda") if cuda else contextlib.nullcontext()):
        t0 = time.time()
        with non_triton(): r = whole_step_check(arm, cycles=1, attn_implementation="eager", workdir=str(tmp / "trl"), **cell)
        out = dict(validated_with="trl non-Triton path (trl.kernels.chunked_logprob._TRITON_AVAILABLE = False)",
                   eager_seconds=time.time() - t0, ledger=r["ledger"], flopcounter=r["counted"], ratio=r["ratio"],
                   components={k: v["ratio"] for k, v in r["components"].items()}, phases=r["phases"])
        _partial(**out)
        t0 = time.time()
        s = whole_step_check(arm, cycles=1, attn_implementation="sdpa", workdir=str(tmp / "trl2"), **cell)
    secs = time.time() - t0
    out.update(sdpa_seconds=secs, sdpa_ledger=s["ledger"], sdpa_flops_per_s=s["ledger"] / secs)
    out["ok"] = abs(out["ratio"] - 1) < 0.01 and all(abs(v - 1) < 0.01 for v in out["components"].values() if v == v)
    return out


def stage_p(cuda: bool, tmp: Path) -> dict:
    "Versions, vllm, free memory, and the kernel SDPA runs for a masked GQA decode step (bf16, 28:4 heads, batch 64, 1536 keys)."
    import importlib.util, torch, transformers, peft
    import torch.nn.functional as F
    rec = dict(torch=torch.__version__, transformers=transformers.__version__, peft=peft.__version__, python=sys.version.split()[0],
               trl=(importlib.util.find_spec("trl") and __import__("trl").__version__) or None, vllm=importlib.util.find_spec("vllm") is not None,
               fused_rms_norm=hasattr(torch.ops.aten, "_fused_rms_norm"))
    sys.path.insert(0, str(ROOT / "bench"))
    from gpu_bundle import CHECKED_IMPORTS
    failed = {}
    for m in CHECKED_IMPORTS:  # every module the check runs, imported here first: a package the bundle lacks fails in seconds
        try: importlib.import_module(m)
        except Exception as e: failed[m] = f"{type(e).__name__}: {str(e)[:200]}"
    rec.update(imports_checked=len(CHECKED_IMPORTS), imports_failed=failed, ok=not failed)
    _partial(**rec)
    dev = "cuda" if cuda else "cpu"
    if cuda: rec["free_gib"], rec["total_gib"] = (v / 2**30 for v in torch.cuda.mem_get_info())
    B, n = (64, 1536) if cuda else (2, 16)
    q = torch.randn(B, 28, 1, 128, device=dev, dtype=torch.bfloat16)
    k = torch.randn(B, 4, n, 128, device=dev, dtype=torch.bfloat16)
    mask = torch.zeros(B, 1, 1, n, device=dev, dtype=torch.bfloat16)
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, k, attn_mask=mask, enable_gqa=True)
        if cuda: torch.cuda.synchronize()
    rec["sdpa_gqa_masked_kernels"] = sorted({e.name for e in prof.events() if ("attention" in e.name.lower() or "sdpa" in e.name.lower() or "fmha" in e.name.lower()
                                             or "flash" in e.name.lower() or "repeat" in e.name.lower() or "gemm" in e.name.lower())})[:12]
    return rec


def random_lora_policy(config: dict, r: int, device: str):
    "A causal LM of `config` with random bf16 weights built on `device` and a rank-`r` LoRA adapter on every linear layer (peft's init: B = 0), in eval mode."
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoConfig, AutoModelForCausalLM
    from race_nb.flops import LINEARS
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(**{k: v for k, v in config.items() if k not in ("architectures", "torch_dtype")}),
                                                 dtype=torch.bfloat16)
    return get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=list(LINEARS), lora_dropout=0.0)).eval()


def stage_d(cuda: bool, tmp: Path) -> dict:
    "Decode-step seconds per path (fastgen eager / graphs / graphs merged, transformers + DynamicCache) against the roofline's ideal time."
    import gc, torch
    import torch.nn.functional as F
    from transformers import DynamicCache
    from race_nb.fastgen import FastDecoder, StepGraphs, cuda_capture, eager_capture
    from race_nb.flops import LINEARS, LoraSpec, ModelFlops, load_config
    from race_nb.roofline import gpu_spec, step_weight_bytes
    from race_nb.memory import kv_bytes
    dev = "cuda" if cuda else "cpu"
    name = torch.cuda.get_device_name() if cuda else "cpu (smoke)"
    spec = gpu_spec(name if cuda else "H100")  # the CPU rehearsal prices its toy rows at an H100's bandwidth (meaningless, never read as a GPU's)
    configs = ["qwen2.5-7b", "qwen2.5-1.5b"] if cuda else ["tiny-s"]  # the paper's largest first: the rows that matter most land first
    batch, contexts, timed, r = (256, (512, 2048), 10, 64) if cuda else (4, (16, 32), 2, 8)
    rows, out_file = [], Path(PARTIAL.get("_file", tmp / "D.json")).with_name("decode.json")
    def sync(): cuda and torch.cuda.synchronize()
    def clock(fn, steps):
        if cuda:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); [fn() for _ in range(steps)]; b.record(); sync()
            return a.elapsed_time(b) / 1e3 / steps
        t0 = time.perf_counter(); [fn() for _ in range(steps)]
        return (time.perf_counter() - t0) / steps
    def kernels(fn):
        "The top kernels of one profiled step and their split by kind (the profiler set up for graph replays first, as gpt-fast does)."
        from torch.profiler import ProfilerActivity, profile
        if cuda and hasattr(torch.profiler, "_utils") and hasattr(torch.profiler._utils, "_init_for_cuda_graphs"): torch.profiler._utils._init_for_cuda_graphs()
        with profile(activities=[ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]) as prof: fn(); sync()
        key = "self_device_time_total" if cuda else "self_cpu_time_total"
        ev = [e for e in prof.key_averages() if getattr(e, key) > 0]
        kind = lambda n: next((k for k, words in (("attention", ("attention", "fmha", "flash", "sdpa", "softmax")), ("gemm", ("gemm", "gemv", "matmul", "mm", "cutlass", "sm90")),
                                                  ("copy", ("copy", "cat", "index", "scatter", "gather")), ("sampling", ("multinomial", "sort", "topk", "argmax")))
                               if any(w in n.lower() for w in words)), "elementwise/other")
        split = collections.defaultdict(float)
        for e in ev: split[kind(e.key)] += getattr(e, key)
        return [dict(name=e.key[:80], us=getattr(e, key)) for e in sorted(ev, key=lambda e: -getattr(e, key))[:8]], dict(split)
    for config in configs:
        c = load_config(config)
        model = random_lora_policy(c, r, dev)
        mf = ModelFlops.from_config(c, lora=LoraSpec(r, LINEARS))
        for n in contexts:
            T = n + timed + 8
            for path in ("fastgen", "fastgen-graphs", "fastgen-graphs-merged", "fastgen-sdpa", "transformers"):
                rec = dict(device=name, config=config, path=path, batch=batch, context=n)
                try:
                    ids, pos = torch.zeros(batch, 1, dtype=torch.long, device=dev), torch.full((batch, 1), n - 1, device=dev)
                    with torch.no_grad():
                        if path.startswith("fastgen"):
                            dec = FastDecoder(model, checked=True, merge=path.endswith("merged"), fuse=False, attention="sdpa" if path.endswith("sdpa") else "matmul")
                            caches, rope = dec.new_cache(batch, T), dec.rope(T)
                            for kc, vc in caches: kc.normal_(); vc.normal_()
                            bias = torch.zeros(batch, dec.KV, 1, T, dtype=torch.bfloat16, device=dev)
                            wpos = torch.tensor([n - 1], device=dev)
                            run = lambda *a: dec.run(*a, rope, caches, bias)
                            step = StepGraphs(run, cuda_capture if cuda else eager_capture, bucket=n) if "graphs" in path else run
                            fn = lambda: torch.multinomial(F.softmax(step(ids, pos, wpos, n).float(), -1), 1)
                        else:
                            cache = DynamicCache(config=model.config)
                            kv, hd = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
                            for layer in range(model.config.num_hidden_layers):
                                cache.update(torch.randn(batch, kv, n - 1, hd, dtype=torch.bfloat16, device=dev),
                                             torch.randn(batch, kv, n - 1, hd, dtype=torch.bfloat16, device=dev), layer)
                            mask = torch.ones(batch, T, dtype=torch.long, device=dev)
                            mask[:, 0] = 0  # left padding somewhere, as in a real batch: the masked SDPA path
                            def fn():
                                L = cache.get_seq_length() + 1
                                out = model(input_ids=ids, attention_mask=mask[:, :L], past_key_values=cache, use_cache=True,
                                            position_ids=torch.full((batch, 1), L - 1, device=dev), logits_to_keep=1)
                                return torch.multinomial(F.softmax(out.logits[:, -1].float(), -1), 1)
                        clock(fn, 3)  # warm-up (captures the graph)
                        rec["graphs"] = step.status if isinstance(step, StepGraphs) else "off"
                        rec["merge"] = ("merged" if dec.merged else f"refused: {dec.merge_refused}") if path.endswith("merged") else "off"
                        rec["seconds"] = clock(fn, timed)
                        rec["top_kernels"], rec["kernel_split_us"] = kernels(fn)
                    ideal = step_weight_bytes(mf, lora=not path.endswith("merged")) + batch * n * kv_bytes(mf)
                    rec.update(ideal_bytes=ideal, ideal_seconds=ideal / spec["bandwidth"], fraction_of_roofline=ideal / spec["bandwidth"] / rec["seconds"],
                               peak_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else None)
                except Exception as e:  # one path failing (an OOM, a capture) is a row, not the end of the stage
                    rec.update(error=f"{type(e).__name__}: {str(e)[:300]}")
                rows.append(rec)
                out_file.write_text(json.dumps(dict(device=name, smoke=not cuda, rows=rows), indent=1, default=float) + "\n")
                _partial(rows=rows)
                print(f"D {config} {path} ctx {n}: " + (f"{rec['seconds'] * 1e3:.2f} ms/step, {rec['fraction_of_roofline']:.2f} of the roofline"
                                                         if "seconds" in rec and "error" not in rec else rec.get("error", "?")), flush=True)
                dec = caches = cache = step = fn = run = None  # this path's cache and graphs freed before the next path allocates its own
                gc.collect()
                if cuda: torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
        del model; gc.collect()
        if cuda: torch.cuda.empty_cache()
    return dict(rows=rows, ok=all("error" not in r for r in rows))


def stage_g(cuda: bool, tmp: Path) -> dict:
    "Fast generation's peak memory at the paper cell's 7B shape against race_nb.memory's plan for it (each figure written as measured)."
    import gc, torch
    from race_nb.fastgen import fast_generate
    from race_nb.flops import load_config
    from race_nb.memory import GiB, planned_peak
    dev = "cuda" if cuda else "cpu"
    config, (B, P, C, group, r) = ("qwen2.5-7b", (256, 512, 2048, 16, 64)) if cuda else ("tiny-s", (32, 16, 24, 4, 8))
    c = load_config(config)
    model = random_lora_policy(c, r, dev)
    mem = lambda: torch.cuda.max_memory_allocated() / GiB if cuda else None
    if cuda: torch.cuda.synchronize(); torch.cuda.reset_peak_memory_stats()
    rec = dict(shape=f"{config}: {B} rows of {P}-token prompts, {group} rollouts per prompt stored once, {C} new tokens, LoRA r {r}, bf16",
               weights_gib=mem(), planned_gib=planned_peak(config, "generation", B, P, lora_r=r, new_tokens=C, group=group) / GiB)
    _partial(**rec)
    ids = torch.randint(0, min(c["vocab_size"], 1000), (B, P), device=dev)
    info, t0 = {}, time.time()
    with torch.no_grad():
        fast_generate(model, ids, max_new_tokens=1, eos_token_id=None, checked=True, groups=[i // group for i in range(B)], info=info)
    if cuda: torch.cuda.synchronize()
    rec.update(prefill_peak_gib=mem(), prefill_seconds=time.time() - t0)  # the cache of 1 new token: the prefill's own transient
    _partial(**rec)
    if cuda: torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    with torch.no_grad():
        fast_generate(model, ids, max_new_tokens=C, eos_token_id=None, checked=True, groups=[i // group for i in range(B)], info=info)
    if cuda: torch.cuda.synchronize()
    rec.update(peak_gib=mem(), seconds=time.time() - t0, graphs=info.get("graphs"), tokens=info.get("tokens"))
    rec["ratio_measured_to_planned"] = rec["peak_gib"] / rec["planned_gib"] if cuda else None
    _partial(**rec)
    del model; gc.collect()
    if cuda: torch.cuda.empty_cache()
    return rec


def run_stage(name: str, smoke: bool, out_dir: Path) -> None:
    "One stage in this process (the parent starts each in its own): its JSON, with the error if it failed."
    import torch
    cuda = torch.cuda.is_available() and not smoke
    tmp = Path(tempfile.mkdtemp(prefix=f"race_gpu_{name}_"))
    t0 = time.time()
    rec = dict(stage=name, device=torch.cuda.get_device_name() if cuda else "cpu (smoke)", smoke=not cuda, torch=torch.__version__)
    PARTIAL.update(rec, status="stopped before it finished (its limit): the phases measured so far", _file=str(out_dir / f"{name}.json"))
    try:
        rec.update({"P": stage_p, "D": stage_d, "G": stage_g, "S1": stage_s1, "S2": stage_s2, "S3": stage_s3}[name](cuda, tmp))
        rec["status"] = "ok" if rec.get("ok", True) else "failed check"
    except Exception as e:
        rec.update(status="error", error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-4000:])
    rec["seconds"] = time.time() - t0
    PARTIAL.pop("_file", None)
    (out_dir / f"{name}.json").write_text(json.dumps(rec, indent=2, default=float) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="every stage on the CPU at toy shapes (what the tests run)")
    ap.add_argument("--stages", nargs="+", default=None, choices=list(STAGES), help="the stages to run (default: all, or the --command's)")
    ap.add_argument("--command", choices=list(COMMANDS), default=None, help="one of the loan's two commands: 1 = P D, 2 = G S1 (bench/GPU.md)")
    ap.add_argument("--out-dir", default=None, help="one JSON per stage, and gpu_check.json, here (default: bench/gpu_check on a GPU, a temporary folder with --smoke)")
    ap.add_argument("--out", default=None, help="the summary JSON (default: DIR/gpu_check.json, and bench/gpu_check.json on a GPU)")
    ap.add_argument("--s1-completion", type=int, default=None, help=f"S1's completion length on a GPU (default {S1_COMPLETION}; the paper's 2048 may not fit its limit)")
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)  # run one stage in this process (the parent's subprocess)
    a = ap.parse_args()
    a.stages = a.stages or (COMMANDS[a.command] if a.command else list(STAGES))
    if a.s1_completion: os.environ["RACE_S1_COMPLETION"] = str(a.s1_completion)  # the stage's subprocess reads it
    out_dir = Path(a.out_dir or (tempfile.mkdtemp(prefix="race_gpu_check_smoke_") if a.smoke else ROOT / "bench" / "gpu_check"))
    out_dir.mkdir(parents=True, exist_ok=True)
    find_data()
    if a.stage: run_stage(a.stage, a.smoke, out_dir); return
    import torch
    if not torch.cuda.is_available() and not a.smoke:
        print("gpu_check: no CUDA device (torch.cuda.is_available() is False, torch " + torch.__version__ + "): this check measures a GPU. "
              "Run it on a CUDA machine, or pass --smoke for the CPU rehearsal.", file=sys.stderr)
        sys.exit(2)
    cuda = not a.smoke
    print(f"gpu_check: {'CUDA: ' + torch.cuda.get_device_name() if cuda else 'smoke (CPU, toy shapes)'}; stages {' '.join(a.stages)}, at most "
          f"{sum(STAGES[s] for s in a.stages) if cuda else SMOKE_TIMEOUT * len(a.stages)} s", flush=True)
    summary = dict(device=torch.cuda.get_device_name() if cuda else "cpu (smoke)", smoke=not cuda, torch=torch.__version__, stages={})
    for s in a.stages:
        t0, limit = time.time(), STAGES[s] if cuda else SMOKE_TIMEOUT
        (out_dir / f"{s}.json").unlink(missing_ok=True)
        try: rc = subprocess.run([sys.executable, __file__, "--stage", s, "--out-dir", str(out_dir)] + (["--smoke"] if a.smoke else []),
                                 timeout=limit).returncode
        except subprocess.TimeoutExpired: rc = "timeout"
        f = out_dir / f"{s}.json"
        rec = json.loads(f.read_text()) if f.exists() else dict(stage=s, status=f"no result (exit {rc}, limit {limit} s)")
        if rc == "timeout": rec["status"] = f"timeout at {limit} s: " + str(rec.get("status"))
        summary["stages"][s] = {k: rec.get(k) for k in ("status", "seconds", "error")}
        print(f"{s}: {rec['status']} in {time.time() - t0:.0f} s" + (f" - {rec.get('error')}" if rec.get("error") else ""), flush=True)
        if s == "G" and rec.get("peak_gib") is not None:
            summary["generation_memory"] = {k: rec.get(k) for k in ("shape", "planned_gib", "prefill_peak_gib", "peak_gib", "ratio_measured_to_planned", "graphs")}
        if s == "S1" and rec.get("status") == "ok":
            summary["big_cycle"] = {k: rec[k] for k in ("shape", "cycle_seconds", "cycle_flops", "flops_per_s", "mfu", "generation_seconds", "generated_tokens")}
            summary["memory"] = dict(measured=rec["marks"], predicted_gib=rec["predicted_gib"], ratio=rec["ratio_measured_to_predicted"])
        text = json.dumps(summary, indent=2, default=float)
        (out_dir / "gpu_check.json").write_text(text + "\n")  # after each stage: a command cut off at its limit keeps what ran
    text = json.dumps(summary, indent=2, default=float)
    (out_dir / "gpu_check.json").write_text(text + "\n")
    if a.out or cuda: Path(a.out or ROOT / "bench" / "gpu_check.json").write_text(text + "\n")
    print(text)
    sys.exit(0 if all(v["status"] == "ok" for v in summary["stages"].values()) else 1)


if __name__ == "__main__":
    main()
