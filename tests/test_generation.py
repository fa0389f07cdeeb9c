"""Generation at the GPU's limit, the parts a CPU can check: the merged generation copy in a real trainer (ledger against
FlopCounterMode, base weights untouched), and a CUDA out-of-memory error in generation or scoring halving the call and retrying."""
import logging

import pytest
import torch

from race_nb import grpo
from race_nb.config import ARMS
from race_nb.build import build_trainer, whole_step_check
from race_nb.config import CellConfig
from race_nb.grpo import count_by_component


def _base_weights(tr):
    return {n: p.detach().clone() for n, p in tr.model.named_parameters() if "lora_" not in n}


def test_merged_generation_ledger_and_base_untouched(tmp_path):
    "A trainer generating from a merged copy charges the base model's FLOPs plus the merge, equal to FlopCounterMode within 1%; "
    "the trained model's base weights are bit-identical after training, and its LoRA weights did train."
    out = whole_step_check(ARMS["n8-m4"], cycles=2, workdir=tmp_path / "check", merge_generation=True)
    assert out["components"]["search"]["ratio"] == pytest.approx(1.0, abs=0.01), out["components"]
    assert out["ratio"] == pytest.approx(1.0, abs=0.01), out
    tr = build_trainer(CellConfig(budget=1e15, max_steps=2, prompts_per_step=4, arm="n8-m4", merge_generation=True), tmp_path / "tr")
    assert tr.fast_reason is None, tr.fast_reason
    base, lora = _base_weights(tr), {n: p.detach().clone() for n, p in tr.model.named_parameters() if "lora_B" in n}
    tr.train()
    assert all(torch.equal(base[n], p) for n, p in tr.model.named_parameters() if n in base)
    assert any(not torch.equal(lora[n], p) for n, p in tr.model.named_parameters() if n in lora)
    assert tr._gen_calls and all(c[3] > 0 for c in tr._gen_calls), tr._gen_calls  # every call merged, and charged for it


def test_oom_in_generation_halves_the_chunk_and_charges_what_ran(tmp_path, monkeypatch, caplog):
    "A CUDA out-of-memory error raised inside a generation call (rows > 8 here) halves the chunk and reruns the cycle, twice at "
    "most; the ledger still equals FlopCounterMode (the calls that completed are charged, the failed ones ran nothing)."
    real, raised = grpo.rollouts, []
    def flaky(model, part, *a, **k):
        if len(part) > 8:
            raised.append(len(part))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return real(model, part, *a, **k)
    monkeypatch.setattr(grpo, "rollouts", flaky)
    tr = build_trainer(CellConfig(budget=1e15, max_steps=1, prompts_per_step=4, arm="n8-m4"), tmp_path)
    with caplog.at_level(logging.WARNING, logger="race_nb.fastgen"):
        _, parts = count_by_component(tr)
    assert raised == [32, 16] and tr.generation_chunk == 8, (raised, tr.generation_chunk)
    assert [c[0] for c in tr._gen_calls] == [8, 8, 8, 8]
    assert caplog.text.count("this cycle run again") == 2, caplog.text
    assert tr.ledger.totals()["search"] == pytest.approx(parts["search"], rel=0.01)


def test_oom_three_times_is_the_end(tmp_path, monkeypatch):
    "Past OOM_RETRIES halvings the error propagates: the cell fails with CUDA's own message, it does not loop."
    def always(*a, **k): raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 1.00 GiB")
    monkeypatch.setattr(grpo, "rollouts", always)
    tr = build_trainer(CellConfig(budget=1e15, max_steps=1, prompts_per_step=4, arm="n8-m4"), tmp_path)
    with pytest.raises(torch.cuda.OutOfMemoryError, match="out of memory"):
        tr.train()


def test_oom_in_scoring_halves_the_micro_batch(monkeypatch, caplog):
    "An hf scorer that runs out of memory on a forward of more than 100 padded tokens halves max_batch_tokens until it fits, "
    "returns the same scores as an unconstrained run, and charges every forward that ran."
    from race_nb.rewards import prm
    r = prm.prm(backend="hf", path="toy:prm", attn_implementation="eager", max_batch_tokens=256)
    sc = r.scorer
    prompts, comps = ["What is 2+3?"] * 6, ["2+3=5\nSo 5.\n#### 5"] * 6
    want, _ = sc.score(prompts, comps)
    real = sc.model.forward
    def small_only(*a, **k):
        ids = k.get("input_ids", a[0] if a else None)
        if ids.numel() > 100: raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return real(*a, **k)
    monkeypatch.setattr(sc.model, "forward", small_only)
    with caplog.at_level(logging.WARNING):
        got, work = sc.score(prompts, comps)
    assert sc.max_batch_tokens <= 128 and "CUDA out of memory scoring" in caplog.text
    assert got == want
    assert work["flops"] > 0


def test_finished_rows_leave_and_prompts_are_shared_in_a_trainer(tmp_path, caplog):
    "The trainer's fast generation drops finished rows and prefills each prompt once per group; the ledger charges what ran "
    "and equals FlopCounterMode within 1%; how generation ran is said in the log once and kept for trained.json."
    import json
    from race_nb.cell import _write_trained
    out = whole_step_check(ARMS["n8-m4"], cycles=2, workdir=tmp_path / "check")  # compact generation: the cells' default
    assert out["components"]["search"]["ratio"] == pytest.approx(1.0, abs=0.01), out["components"]
    tr = build_trainer(CellConfig(budget=1e15, max_steps=2, prompts_per_step=4, arm="n8-m4"), tmp_path / "tr")
    with caplog.at_level(logging.INFO, logger="race_nb.grpo"): tr.train()
    calls = tr._gen_calls
    assert calls and all(c.prefill_rows == 4 and c.rows == 32 for c in calls), calls  # 4 prompts of 8 rollouts: 4 prefills
    rows = [n for c in calls for n, _ in c.steps]
    assert min(rows) < 32 and all(c.graphs == "off" and c.merge == "off" for c in calls), rows  # rows left; no graphs on a CPU
    assert tr.generation_path == dict(path="fast", graphs=["off"], merge=["off"], compact=True), tr.generation_path
    assert caplog.text.count("generation: path fast, graphs off, merge off, compact True") == 1, caplog.text
    _write_trained(tr, 1.0, tmp_path / "cell")
    assert json.loads((tmp_path / "cell" / "trained.json").read_text())["generation"] == tr.generation_path


def test_an_oom_in_graph_capture_halves_the_chunk():
    "An out-of-memory error while capturing the decode step is an OOM, not a failed capture: it leaves fast_generate, and "
    "chunked_with_retry halves the call and reruns it (a failed capture of another kind generates eagerly)."
    from race_nb.fastgen import chunked_with_retry, fast_generate
    from race_nb.models import char_tokenizer, tiny_model
    tok, m = char_tokenizer(), tiny_model("tiny-s", seed=0).eval()
    def capture(fn, pool):
        if fn.__closure__ and len(seen) and seen[-1] > 2: raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.00 GiB")
        return fn(), fn
    seen = []
    def call(part):
        seen.append(len(part))
        enc = tok(part, return_tensors="pt", padding=True)
        out = fast_generate(m, enc["input_ids"], enc["attention_mask"], max_new_tokens=6, graphs=True, capture=capture)
        return out.tolist()
    out, chunk = chunked_with_retry(["Q 1+2", "Q 3+4", "Q 5", "Q 6-1", "Q 7", "Q 8"], None, call, tries=2)
    assert seen[:2] == [6, 3] and chunk == 1 and len(out) == 6, (seen, chunk)
