"""GPU check of the paper path (issue 13): Qwen2.5-1.5B's real architecture with random weights (no download),
a few ledgered GRPO steps in bf16 with an hf PRM back-end, then ledger vs FlopCounterMode, peak memory, tokens/s,
MFU and fast generation vs `generate`. Usage: `python bench/gpu_check.py` on a CUDA machine (about 3-5 minutes);
`python bench/gpu_check.py --smoke` runs the same code on the CPU with the toy checkpoints (seconds)."""
import argparse, json, os, sys, tempfile, time
from pathlib import Path

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def random_checkpoint(config_name: str, folder: Path, arch: str = "Qwen2ForCausalLM", num_labels: int = 0) -> Path:
    "Save a randomly initialised model of a shipped architecture (no download) with the toy tokenizer's special tokens."
    import transformers
    from transformers import AutoConfig
    from race_nb.flops import load_config
    from race_nb.toy import toy_checkpoint
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(toy_checkpoint("qwen2.5-1.5b"))
    c = {k: v for k, v in load_config(config_name).items() if k not in ("architectures", "torch_dtype", "transformers_version")}
    c.update(vocab_size=max(c["vocab_size"], len(tok)), architectures=[arch], pad_token_id=tok.pad_token_id)
    if num_labels: c["num_labels"] = num_labels
    with torch.device("cuda"):
        model = getattr(transformers, arch)(AutoConfig.for_model(**c)).to(torch.bfloat16)
    model.save_pretrained(folder); tok.save_pretrained(folder)
    return folder


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--smoke", action="store_true", help="CPU run on the toy checkpoints")
    ap.add_argument("--cycles", type=int, default=3)
    a = ap.parse_args()
    from race_nb.grpo import Arm, whole_step_check, CellConfig, build_trainer
    from race_nb.models import load_policy, generate
    cuda = torch.cuda.is_available() and not a.smoke
    tmp = Path(tempfile.mkdtemp(prefix="race_gpu_check_"))
    if cuda:
        policy = random_checkpoint("qwen2.5-1.5b", tmp / "policy")
        prm = random_checkpoint("qwen2.5-1.5b", tmp / "prm", "Qwen2ForTokenClassification", 2)  # PRM interface, 1.5B shape
        comp, prompts = 256, 8
    else:
        policy, prm, comp, prompts = "toy:qwen2.5-1.5b", "toy:prm", 16, 4
    cell = dict(model="qwen2.5-1.5b", model_path=str(policy), train_data="gsm8k:train", eval_id="gsm8k:test", eval_ood="math500:test",
                reward="prm", reward_settings=dict(backend="hf", path=str(prm), attn_implementation="eager", require_answer=False),
                judge_settings=dict(backend="hf", path=str(prm), require_answer=False), max_completion_length=comp,
                prompts_per_step=prompts, micro_batches=2, gradient_checkpointing=True, lora_r=64, lora_alpha=128)
    arm = Arm("check", n=4, m=4, mu=2)
    out = {"device": torch.cuda.get_device_name() if cuda else "cpu (smoke)"}
    if cuda: torch.cuda.reset_peak_memory_stats()
    t0 = time.time()
    r = whole_step_check(arm, cycles=a.cycles, attn_implementation="eager", workdir=str(tmp / "trl"), **cell)
    out.update(eager_seconds=time.time() - t0, ledger=r["ledger"], flopcounter=r["counted"], ratio=r["ratio"], phases=r["phases"])
    t0 = time.time()
    s = whole_step_check(arm, cycles=a.cycles, attn_implementation="sdpa", workdir=str(tmp / "trl2"), **cell)
    secs = time.time() - t0
    out.update(sdpa_seconds=secs, sdpa_ledger=s["ledger"], sdpa_flops_per_s=s["ledger"] / secs,
               mfu_vs_989TF=s["ledger"] / secs / 989e12 if cuda else None,
               peak_memory_gib=torch.cuda.max_memory_allocated() / 2**30 if cuda else None)
    # fast generation vs generate (fp32: the only dtype fast generation is used in)
    model, tok = load_policy("qwen2.5-1.5b", policy, dtype="float32", device="cuda" if cuda else None)
    qs = [tok.apply_chat_template([{"role": "user", "content": f"What is {i} + {i}?"}], tokenize=False, add_generation_prompt=True) for i in range(4)]
    t0 = time.time(); fast = generate(model, tok, qs, max_new_tokens=32, fast=True); tf = time.time() - t0
    t0 = time.time(); slow = generate(model, tok, qs, max_new_tokens=32, fast=False); ts = time.time() - t0
    out.update(fastgen_identical=fast == slow, fastgen_seconds=tf, generate_seconds=ts)
    print(json.dumps(out, indent=2, default=float))
    ok = abs(out["ratio"] - 1) < 0.01 and out["sdpa_ledger"] > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
