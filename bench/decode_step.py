"""Bytes each operator reads and writes in one decode step, against the roofline's ideal (issue 62).

    python bench/decode_step.py [--out bench/decode_step.json]

A decode step is bandwidth-bound: its ideal traffic is every weight read once (LM head included, the embedding only for the
rows it gathers) plus the KV cache read once up to its filled length. A TorchDispatchMode sees every aten operator of the
step and adds up the bytes of the tensors it reads and writes: a view costs nothing; a broadcast input counts its distinct
elements; an in-place write into a cache counts the rows written, not the whole cache. Two kinds of rows:

- COUNTED at the real Qwen2.5 widths (1.5B, 7B; bf16 weights, fp32 LoRA r=64 on every linear as peft keeps it) under
  FakeTensorMode: no weights, no memory, nothing run. Paths: `fastgen` (race_nb.fastgen's decode step as CUDA runs it:
  unfused, LoRA unmerged in bf16; the sampling of the step's tokens included), `fastgen-merged` (the adapter merged into a
  generation copy), and `transformers` (the installed transformers' forward of one token through peft, with a DynamicCache
  holding the context: what trl's path runs). Batch 256; contexts 512 + 0 / 1024 / 2048 generated tokens.
- MEASURED on CPU with real tensors: a bf16 GQA toy with Qwen2.5-7B's 7:1 head ratio (4 layers, hidden 448, 32 rows, prompts
  of different lengths, LoRA r=8), every decode step of a 64-token generation through `race_nb.fastgen.rollouts` (the function
  a cell's trainer calls) and through transformers' `generate` (trl's path), prefill excluded; the ratio is the steps' bytes
  over their ideal bytes.

Times on a GPU follow from bytes / bandwidth only where the step is bandwidth-bound; they are computed, not measured, and
bench/gpu_check.py measures them on the first GPU lent."""
import argparse, json, platform, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

aten = torch.ops.aten
SCATTERS = {aten.index_copy_.default: 3, aten.index_put_.default: 2, aten.index_add_.default: 3}  # op -> argument written
GATHERS = {aten.embedding.default, aten.index.Tensor, aten.index_select.default}
NO_READ_SELF = {aten.copy_.default, aten.fill_.Scalar, aten.zero_.default, aten.fill_.Tensor}


def distinct_bytes(t) -> int:
    "Bytes of the distinct elements a tensor (view) spans: broadcast (stride 0) dimensions count once."
    n = 1
    for s, st in zip(t.shape, t.stride()):
        if st != 0: n *= s
    return n * t.element_size()


class ByteCounter(TorchDispatchMode):
    "Bytes read and written per aten operator (views free), and the operator count, while `on`."
    def __init__(self):
        super().__init__()
        self.read = self.written = self.ops = 0
        self.by_op, self.on = {}, True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.on or func.namespace != "aten" or func.is_view or func is aten.detach.default: return out  # prim.device etc.: metadata
        tensors = [a for a in tree_flatten((args, kwargs or {}))[0] if isinstance(a, torch.Tensor)]
        mutates = func._schema.is_mutable
        if func in GATHERS:  # a table read only at the gathered rows: what the output holds, plus the indices
            w = sum(distinct_bytes(o) for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor))
            r = w + sum(distinct_bytes(a) for a in tensors if not a.is_floating_point())
        elif func in SCATTERS:
            src = args[SCATTERS[func]] if not isinstance(args[SCATTERS[func]], (list, tuple)) else args[SCATTERS[func]][0]
            r, w = sum(distinct_bytes(a) for a in tensors[1:]), distinct_bytes(src)
        elif mutates:
            r = sum(distinct_bytes(a) for a in tensors[1:]) + (0 if func in NO_READ_SELF else distinct_bytes(tensors[0]))
            w = distinct_bytes(tensors[0])
        else:
            r = sum(distinct_bytes(a) for a in tensors)
            w = sum(distinct_bytes(o) for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor))
        self.read += r; self.written += w; self.ops += 1
        k = str(func.overloadpacket.__name__)
        self.by_op[k] = self.by_op.get(k, 0) + r + w
        return out

    @property
    def total(self): return self.read + self.written


def ideal_bytes(mf, batch: int, context: int, lora: bool, dtype_bytes: int = 2) -> int:
    "Every weight once (non-embedding, LM head; the embedding's gathered rows), the LoRA adapter (bf16) when unmerged, the KV cache once at `context`."
    from race_nb.memory import kv_bytes
    head = 0 if mf.tied else mf.vocab * mf.hidden
    return ((mf.n_params + head) * dtype_bytes + batch * mf.hidden * dtype_bytes + (mf.n_lora_params * 2 if lora else 0)
            + batch * context * kv_bytes(mf))


def fake_step(config: str, path: str, batch: int, prompt: int, generated: int, lora_r: int = 64) -> dict:
    "Count one decode step at context prompt + generated, at the config's real widths, under FakeTensorMode."
    from torch._subclasses.fake_tensor import FakeTensorMode
    from race_nb.flops import LINEARS, LoraSpec, ModelFlops, load_config
    from race_nb.memory import _fake_friendly, _fake_model
    from race_nb.fastgen import FastDecoder
    import torch.nn.functional as F
    n, T = prompt + generated, prompt + 2048
    c = load_config(config)
    mf = ModelFlops.from_config(c, lora=LoraSpec(lora_r, LINEARS))
    with _fake_friendly(), FakeTensorMode(allow_non_fake_inputs=True):
        model = _fake_model(c, lora_r, None).eval()
        ids, pos = torch.zeros(batch, 1, dtype=torch.long), torch.full((batch, 1), n - 1)
        counter = ByteCounter()
        with torch.no_grad():
            if path.startswith("fastgen"):
                dec = FastDecoder(model, checked=True, merge=path.endswith("merged"), fuse=False)
                caches, rope = dec.new_cache(batch, T), dec.rope(T)
                bias = torch.zeros(batch, dec.KV, 1, T, dtype=torch.bfloat16)
                wpos = torch.tensor([n - 1])
                with counter:
                    logits = dec.run(ids, pos, wpos, n, rope, caches, bias)
                    torch.multinomial(F.softmax(logits.float() / 0.9, dim=-1), 1)  # the step's sampling, as fast_generate runs it
            else:
                from transformers import DynamicCache
                cache = DynamicCache(config=model.config)
                kv, hd = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
                for layer in range(model.config.num_hidden_layers):
                    cache.update(torch.zeros(batch, kv, n - 1, hd, dtype=torch.bfloat16), torch.zeros(batch, kv, n - 1, hd, dtype=torch.bfloat16), layer)
                mask = torch.ones(batch, n, dtype=torch.long)
                with counter:
                    out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, position_ids=pos, logits_to_keep=1)
                    torch.multinomial(F.softmax(out.logits[:, -1].float() / 0.9, dim=-1), 1)  # the sampling a decode step runs: measured, its token not needed
    ideal = ideal_bytes(mf, batch, n, lora=not path.endswith("merged"))
    top = sorted(counter.by_op.items(), key=lambda kv: -kv[1])[:6]
    return dict(kind="COUNTED (FakeTensorMode, CPU)", config=config, path=path, batch=batch, context=n, bytes=counter.total,
                ideal=ideal, ratio=counter.total / ideal, ops=counter.ops, top_ops={k: v for k, v in top})


def toy_policy(dtype=torch.bfloat16):
    "A real bf16 Qwen2 with Qwen2.5-7B's 7:1 GQA ratio (4 layers, hidden 448) and an fp32 LoRA adapter beside it, as peft keeps one."
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from peft import LoraConfig, get_peft_model
    from race_nb.flops import LINEARS
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=512, hidden_size=448, intermediate_size=1216, num_hidden_layers=4, num_attention_heads=14,
                      num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=False)
    m = Qwen2ForCausalLM(cfg).to(dtype)
    m = get_peft_model(m, LoraConfig(r=8, lora_alpha=16, target_modules=list(LINEARS), lora_dropout=0.0))
    for n_, p in m.named_parameters():
        if "lora_B" in n_: torch.nn.init.normal_(p, std=0.02)
    return m.eval()


def measured_toy(path: str, rows: int = 32, new: int = 64) -> dict:
    "Bytes of every decode step of a real bf16 generation on CPU (prefill excluded) over the steps' ideal bytes."
    from race_nb.fastgen import FastDecoder, rollouts
    from race_nb.flops import LINEARS, LoraSpec, ModelFlops
    m = toy_policy()
    mf = ModelFlops.from_config(m.config.to_dict(), lora=LoraSpec(8, LINEARS))
    g = torch.Generator().manual_seed(1)
    prompts = [torch.randint(3, 512, (int(L),), generator=g).tolist() for L in torch.randint(8, 40, (rows,), generator=g)]
    P = max(map(len, prompts))
    counter, contexts = ByteCounter(), []
    if path == "fastgen":
        run = FastDecoder.run
        def counted(self, ids, pos, wpos, read, *a):
            counter.on = ids.shape[1] == 1
            if counter.on: contexts.append(read)
            try: return run(self, ids, pos, wpos, read, *a)
            finally: counter.on = True
        FastDecoder.run = counted
        try:
            with counter: rollouts(m, prompts, 0, [], new, 1.0, [])
        finally: FastDecoder.run = run
    else:
        inner = m.get_base_model()
        def pre(mod, args, kwargs):
            ids = kwargs.get("input_ids")
            counter.on = ids is not None and ids.shape[1] == 1
            if counter.on: contexts.append(kwargs["attention_mask"].shape[1])
        h = inner.register_forward_pre_hook(pre, with_kwargs=True)
        ids = torch.tensor([[0] * (P - len(p)) + p for p in prompts]); mask = (torch.arange(P)[None] >= (P - torch.tensor([len(p) for p in prompts]))[:, None]).long()
        try:
            with counter: m.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, do_sample=True, pad_token_id=0, eos_token_id=None)
        finally: h.remove()
    # the decode steps' bytes were counted with the prefill paused; sampling ops of the step count with the step
    ideal = sum(ideal_bytes(mf, rows, n, lora=True) for n in contexts)
    return dict(kind="MEASURED (real bf16 tensors, CPU)", config="7:1 GQA toy (4 layers, hidden 448)", path=path, batch=rows,
                steps=len(contexts), bytes=counter.total, ideal=ideal, ratio=counter.total / ideal, ops=counter.ops // max(len(contexts), 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "bench" / "decode_step.json"))
    ap.add_argument("--configs", nargs="+", default=["qwen2.5-1.5b", "qwen2.5-7b"])
    ap.add_argument("--batch", type=int, default=256)
    a = ap.parse_args()
    import transformers
    res = dict(how=__doc__.split("\n\n")[1], python=platform.python_version(), torch=torch.__version__,
               transformers=transformers.__version__, rows=[])
    print(f"{'kind':9} {'config':16} {'path':15} {'batch':>5} {'ctx':>5} {'GB/step':>8} {'ideal GB':>8} {'ratio':>6} {'ops':>5}")
    for config in a.configs:
        for gen in (0, 1024, 2047):  # the first, middle and last decode step of a 2048-token completion
            for path in ("fastgen", "fastgen-merged", "transformers"):
                t0 = time.time()
                r = fake_step(config, path, a.batch, 512, gen)
                r["seconds"] = time.time() - t0
                res["rows"].append(r)
                print(f"{'COUNTED':9} {config:16} {path:15} {r['batch']:5d} {r['context']:5d} {r['bytes'] / 1e9:8.2f} {r['ideal'] / 1e9:8.2f} "
                      f"{r['ratio']:6.3f} {r['ops']:5d}", flush=True)
    res["cycle"] = {}
    for config in a.configs:  # a step's bytes are linear in its context, so a 512 + 2048 cycle's ratio is the ratio at its mean context
        for path in ("fastgen", "fastgen-merged", "transformers"):
            rows = [r for r in res["rows"] if r["config"] == config and r["path"] == path]
            res["cycle"][f"{config} {path}"] = sum(r["bytes"] for r in rows) / sum(r["ideal"] for r in rows)
            print(f"cycle (512 + 2048 tokens, batch {a.batch}) {config} {path}: {res['cycle'][f'{config} {path}']:.3f}x the ideal bytes")
    for path in ("fastgen", "transformers"):
        r = measured_toy(path)
        res["rows"].append(r)
        print(f"{'MEASURED':9} {'7:1 GQA toy':16} {path:15} {r['batch']:5d} {'-':>5} {r['bytes'] / 1e9:8.3f} {r['ideal'] / 1e9:8.3f} "
              f"{r['ratio']:6.3f} {r['ops']:5d}", flush=True)
    Path(a.out).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    main()
