"""GPU check of the paper path (issues 13, 26). On a CUDA machine (`make gpu-check`, about 4 minutes on one H200 by the
estimate it prints first):
1. counted: Qwen2.5-1.5B's real architecture with random weights (no download), a few ledgered GRPO cycles in bf16 with
   an hf PRM back-end in the real Qwen2.5-Math-PRM format, under the project's FlopCounterMode (`race_nb.flops.
   flop_counter`, which counts trl's `addmm(out_dtype=, out=)`), with trl's non-Triton path (see `non_triton`);
2. uninstrumented: one GRPO cycle at the paper grid's 7B shape (Qwen2.5-7B, random weights, n = 16, 2048-token
   completions, LoRA r 64, gradient checkpointing): peak memory, seconds per cycle, generation tokens/s;
3. fast generation vs `generate`.
Everything goes into one JSON (`--out`, default bench/gpu_check.json), which `race grid plan` then uses for its GPU-hours.
Without CUDA it exits with status 2 and says so. `--smoke` runs the same code on the CPU at toy shapes (CI runs it).
Data (GSM8K / MATH-500) is found in RACE_DATA_DIR, else in ../shared/data beside the project."""
import argparse, contextlib, json, os, sys, tempfile, time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
H200_PEAK = 989e12  # bf16 dense FLOP/s of an H100/H200 SXM (the same tensor cores)


def find_data() -> Path:
    "RACE_DATA_DIR, else ../shared/data beside the project; set RACE_DATA_DIR for everything the check starts."
    for cand in (os.environ.get("RACE_DATA_DIR"), ROOT.parent / "shared" / "data"):
        if cand and (Path(cand) / "gsm8k" / "test.jsonl").exists():
            os.environ["RACE_DATA_DIR"] = str(Path(cand).resolve())
            return Path(cand).resolve()
    sys.exit("gpu_check: no GSM8K / MATH-500 data: set RACE_DATA_DIR to a folder with gsm8k/ and math500/ "
             f"(looked in RACE_DATA_DIR={os.environ.get('RACE_DATA_DIR')!r} and {ROOT.parent / 'shared' / 'data'})")


@contextlib.contextmanager
def non_triton():
    "trl's torch fallback for its chunked log-prob kernels: the Triton kernels fold logit tiles elementwise, which "
    "FlopCounterMode cannot see; the GEMMs around them are the same torch calls either way, and counted."
    import trl.kernels.chunked_logprob as cl
    old = cl._TRITON_AVAILABLE
    cl._TRITON_AVAILABLE = False
    try: yield
    finally: cl._TRITON_AVAILABLE = old


def random_checkpoint(config_name: str, folder: Path, arch: str = "Qwen2ForCausalLM", device: str = "cuda") -> Path:
    "Save a randomly initialised model of a shipped architecture (no download) with the toy tokenizer's special tokens; "
    "arch Qwen2ForProcessRewardModel writes the real PRM format (race_nb.toy)."
    import transformers
    from transformers import AutoConfig, AutoTokenizer
    from race_nb.flops import load_config
    from race_nb.toy import toy_checkpoint, save_process_reward_model
    tok = AutoTokenizer.from_pretrained(toy_checkpoint("qwen2.5-1.5b"))
    c = {k: v for k, v in load_config(config_name).items() if k not in ("architectures", "torch_dtype", "transformers_version")}
    c.update(vocab_size=max(c["vocab_size"], len(tok)), pad_token_id=tok.pad_token_id)
    if arch == "Qwen2ForProcessRewardModel":
        save_process_reward_model(AutoConfig.for_model(**c), folder, dtype=torch.bfloat16, device=device)
    else:
        with torch.device(device):
            model = getattr(transformers, arch)(AutoConfig.for_model(**c, architectures=[arch])).to(torch.bfloat16)
        model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def counted_check(a, cuda: bool, tmp: Path) -> dict:
    "Ledger against FlopCounterMode over a few cycles (eager attention), then the same cycles with SDPA, timed."
    from race_nb.grpo import Arm, whole_step_check
    if cuda:
        policy = random_checkpoint("qwen2.5-1.5b", tmp / "policy")
        prm = random_checkpoint("qwen2.5-1.5b", tmp / "prm", "Qwen2ForProcessRewardModel")  # the real PRM format, 1.5B shape
        comp, prompts = 256, 8
    else:
        policy, prm, comp, prompts = "toy:qwen2.5-1.5b", "toy:qwen-prm", 16, 4
    cell = dict(model="qwen2.5-1.5b", model_path=str(policy), train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test",
                reward="prm", reward_settings=dict(backend="hf", path=str(prm), attn_implementation="eager", require_answer=False),
                judge_settings=dict(backend="hf", path="toy:judge", require_answer=False), max_completion_length=comp,
                prompts_per_step=prompts, micro_batches=2, gradient_checkpointing=True, lora_r=64, lora_alpha=128)
    arm = Arm("check", n=4, m=4, mu=2)
    t0 = time.time()
    with non_triton(): r = whole_step_check(arm, cycles=a.cycles, attn_implementation="eager", workdir=str(tmp / "trl"), **cell)
    out = dict(validated_with="trl non-Triton path (trl.kernels.chunked_logprob._TRITON_AVAILABLE = False)",
               eager_seconds=time.time() - t0, ledger=r["ledger"], flopcounter=r["counted"], ratio=r["ratio"],
               components={k: v["ratio"] for k, v in r["components"].items()}, phases=r["phases"])
    t0 = time.time()
    s = whole_step_check(arm, cycles=a.cycles, attn_implementation="sdpa", workdir=str(tmp / "trl2"), **cell)
    secs = time.time() - t0
    out.update(sdpa_seconds=secs, sdpa_ledger=s["ledger"], sdpa_flops_per_s=s["ledger"] / secs)
    return out


def big_cycle(cuda: bool, tmp: Path, n: int = 16, prompts: int = 2) -> dict:
    "One uninstrumented GRPO cycle at the paper grid's 7B shape (toy 7B on the CPU): seconds, peak memory, generation tokens/s."
    from race_nb.grpo import Arm, CellConfig, build_trainer
    policy = random_checkpoint("qwen2.5-7b", tmp / "policy7b") if cuda else "toy:qwen2.5-7b"
    comp = 2048 if cuda else 16
    cfg = CellConfig(model="qwen2.5-7b", model_path=str(policy), reward="sparse", arm=None, budget=1e20, max_steps=1, seed=0,
                     train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test", max_completion_length=comp,
                     prompts_per_step=prompts, micro_batches=prompts * n // 4 if cuda else 2, gradient_checkpointing=True,
                     lora_r=64, lora_alpha=128, judge_settings=dict(backend="hf", path="toy:judge"))
    tr = build_trainer(cfg, tmp / "trl7b", arm=Arm("big", n=n, m=n, mu=1))
    if cuda: torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    tr.train()
    secs = time.time() - t0
    ev = tr.ledger.to_frame()
    gen_s = float(ev[(ev.component == "search") & (ev.phase == "generate")].seconds.sum())
    mean_len = next(h["completions/mean_length"] for h in reversed(tr.state.log_history) if "completions/mean_length" in h)
    generated = prompts * n * mean_len  # completion tokens sampled (finished rows stop counting; padding is not counted)
    return dict(shape=f"qwen2.5-7b{'' if cuda else ' (toy)'}, n={n}, prompts={prompts}, completion={comp}, LoRA r=64, gradient checkpointing",
                cycle_seconds=secs, cycle_flops=tr.ledger.total, flops_per_s=tr.ledger.total / secs,
                mfu=tr.ledger.total / secs / H200_PEAK if cuda else None,
                generated_tokens=generated, generation_seconds=gen_s, generation_tokens_per_s=generated / gen_s if gen_s > 0 else None,
                peak_memory_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else None)


def estimate_seconds() -> float:
    "The check's own time estimate on one H200: the 7B cycle's generation at 1.5 s per 64 decode steps (HF generate, bf16), "
    "the update at 15% MFU, the 1.5B checks at 60 s, and 60 s of set-up."
    from race_nb.arm_flops import Arm, arm_flops, policy_flops
    f = arm_flops(Arm("big", n=16, m=16, mu=1), policy_flops("qwen2.5-7b", 64), None, 2, 256, 2048)
    return 2048 / 64 * 1.5 + f["learning"] / (0.15 * H200_PEAK) + 60 + 60


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="CPU run of the same code at toy shapes (what CI runs)")
    ap.add_argument("--cycles", type=int, default=3, help="counted generation cycles")
    ap.add_argument("--out", default=str(ROOT / "bench" / "gpu_check.json"), help="JSON written here (default bench/gpu_check.json)")
    a = ap.parse_args()
    cuda = torch.cuda.is_available()
    if not cuda and not a.smoke:
        print("gpu_check: no CUDA device (torch.cuda.is_available() is False, torch " + torch.__version__ + "): this check measures a GPU. "
              "Run it on a CUDA machine, or pass --smoke for the CPU rehearsal.", file=sys.stderr)
        sys.exit(2)
    cuda = cuda and not a.smoke
    find_data()
    est = estimate_seconds()
    print(f"gpu_check: {'CUDA: ' + torch.cuda.get_device_name() if cuda else 'smoke (CPU, toy shapes)'}; "
          f"estimated {est:.0f} s on one H200", flush=True)
    from race_nb.models import load_policy, generate
    tmp = Path(tempfile.mkdtemp(prefix="race_gpu_check_"))
    out = {"device": torch.cuda.get_device_name() if cuda else "cpu (smoke)", "smoke": not cuda, "torch": torch.__version__,
           "estimated_seconds_h200": est}
    t_all = time.time()
    out["counted"] = counted_check(a, cuda, tmp)
    out["big_cycle"] = big_cycle(cuda, tmp)
    model, tok = load_policy("qwen2.5-1.5b", "toy:qwen2.5-1.5b", dtype="float32", device="cuda" if cuda else None)
    qs = [tok.apply_chat_template([{"role": "user", "content": f"What is {i} + {i}?"}], tokenize=False, add_generation_prompt=True) for i in range(4)]
    t0 = time.time(); fast = generate(model, tok, qs, max_new_tokens=32, fast=True); tf = time.time() - t0
    t0 = time.time(); slow = generate(model, tok, qs, max_new_tokens=32, fast=False); ts = time.time() - t0
    out.update(fastgen_identical=fast == slow, fastgen_seconds=tf, generate_seconds=ts, total_seconds=time.time() - t_all)
    text = json.dumps(out, indent=2, default=float)
    Path(a.out).write_text(text + "\n")
    print(text)
    c = out["counted"]
    ok = abs(c["ratio"] - 1) < 0.01 and all(abs(v - 1) < 0.01 for k, v in c["components"].items() if v == v) and c["sdpa_ledger"] > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
