"""The ledger as a drop-in for a plain trl script: the user's own reward functions, dataset columns, peft config and
trl defaults; every logged number checked against FlopCounterMode, checkpoints carrying the ledger."""
import os, warnings

import pytest
import torch

from race_nb.ledger import FlopsLedger

from conftest import SHARED
pytestmark = pytest.mark.usefixtures("shared_data")


def user_run(tmp_path, declare=True, cls=None, **extra):
    "A plain-trl-shaped script: conversational prompts, the answer in the user's `solution` column, LoRA on q/v only, a rule "
    "callable, a callable running its own PRM, a reward-model path trl loads; trl's defaults (gradient checkpointing on). "
    "`cls`: the trainer class (default LedgerGRPOTrainer; trl's GRPOTrainer for the plain run, as `make bench` times it)."
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForTokenClassification, AutoTokenizer
    from trl import GRPOConfig
    from race_nb.data import load_records
    from race_nb.grpo import LedgerGRPOTrainer, charge_reward_model
    from race_nb.toy import toy_checkpoint
    os.environ.setdefault("RACE_DATA_DIR", str(SHARED))
    policy, judge, prm_path = (str(toy_checkpoint(n)) for n in ("qwen2.5-1.5b", "judge", "prm"))
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": r["prompt"]}], "solution": r["answer"]}
                            for r in load_records("gsm8k", "train", n=16)])

    def correct(completions, solution, **kw):
        return [float(s in c[0]["content"]) for c, s in zip(completions, solution)]

    prm, tok = AutoModelForTokenClassification.from_pretrained(prm_path, attn_implementation="eager"), AutoTokenizer.from_pretrained(prm_path)
    def step_quality(completions, **kw):
        enc = tok([c[0]["content"] or "." for c in completions], return_tensors="pt", padding=True)
        with torch.no_grad(): return prm(**enc).logits.softmax(-1)[..., 1].mean(1).tolist()

    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=8, num_generations=4, max_completion_length=16,
                      num_iterations=2, beta=0.04, logging_steps=1, use_cpu=True, bf16=False, report_to="none", seed=0,
                      **{"max_steps": 4, "save_strategy": "no", **extra.pop("args", {})},
                      model_init_kwargs={"attn_implementation": "eager", "dtype": torch.float32})
    funcs = [correct, charge_reward_model(step_quality, prm) if declare else step_quality, judge]
    return (cls or LedgerGRPOTrainer)(model=policy, reward_funcs=funcs, args=args, train_dataset=ds,
                             peft_config=LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"), **extra)


def test_every_component_matches_flopcounter_and_reaches_the_log(tmp_path, capsys):
    from race_nb.grpo import count_by_component
    with pytest.warns(UserWarning, match=r"\['correct'\] are charged 0 FLOPs"):
        tr = user_run(tmp_path)
    _, counted = count_by_component(tr)
    t = tr.ledger.totals()
    for c in ("search", "learning", "reward"):
        assert counted[c] > 0 and abs(t[c] / counted[c] - 1) < 0.01, (c, t[c], counted[c])
    phases = set(tr.ledger.to_frame().phase)
    assert {"generate", "old_logprob", "ref_logprob", "update", "step_quality"} <= phases, phases  # the declared PRM
    assert any(p not in ("generate", "old_logprob", "ref_logprob", "update", "step_quality") for p in phases)  # trl's judge
    hist = [h for h in tr.state.log_history if "loss" in h]
    last = hist[-1]
    assert last["flops/total"] == pytest.approx(tr.ledger.total) and last["flops/rho"] == pytest.approx(tr.ledger.rho)
    assert sum(h["flops/learning_per_step"] for h in hist[1:]) + hist[0]["flops/learning"] == pytest.approx(t["learning"])
    assert tr.state.total_flos == pytest.approx(tr.ledger.total)
    out = tmp_path / "out"
    assert FlopsLedger.load(out / "ledger.parquet").total == pytest.approx(tr.ledger.total)
    card = (out / "compute_card.txt").read_text()
    assert "rho = learning / total" in card and "charged 0 FLOPs (no model declared): correct" in card
    assert "compute card" in capsys.readouterr().out


def test_undeclared_model_is_named_and_budget_stops(tmp_path):
    with pytest.warns(UserWarning, match=r"\['correct', 'step_quality'\] are charged 0 FLOPs"):
        tr = user_run(tmp_path, declare=False, budget=3e9, args=dict(max_steps=50), report_card=False)
    tr.train()
    assert tr.ledger.exhausted and tr.state.global_step < 50
    assert "step_quality" not in set(tr.ledger.to_frame().phase)
    assert "flops/budget_used" in tr.state.log_history[-2]


def test_checkpoint_carries_the_ledger_and_resume_continues_it(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = user_run(tmp_path, args=dict(max_steps=4, save_strategy="steps", save_steps=2), report_card=False)
        tr.train()
        saved = FlopsLedger.load(tmp_path / "out" / "checkpoint-2" / "ledger.parquet")
        assert 0 < saved.total < tr.ledger.total and max(e["step"] for e in saved.events) < 2
        again = user_run(tmp_path, args=dict(max_steps=4, save_strategy="no"), report_card=False)
        again.train(resume_from_checkpoint=str(tmp_path / "out" / "checkpoint-2"))
    ev = again.ledger.to_frame()
    assert ev[ev.step < 2].flops.sum() == pytest.approx(saved.total)  # the first two steps come from the checkpoint
    assert ev[ev.step >= 2].flops.sum() > 0
    assert again.state.total_flos == pytest.approx(again.ledger.total)


def test_contradicting_budget_is_refused():
    from race_nb.grpo import LedgerGRPOTrainer
    with pytest.raises(ValueError, match="contradicts the ledger's budget"):
        LedgerGRPOTrainer(ledger=FlopsLedger(budget=1e9), budget=2e9)


def test_fast_generation_declined_says_why(tmp_path, caplog):
    "Asking for fast generation where it cannot reproduce trl's sampling (top-k here) falls back to trl's generate and logs why."
    import logging
    with warnings.catch_warnings(), caplog.at_level(logging.INFO, logger="race_nb.grpo"):
        warnings.simplefilter("ignore")
        tr = user_run(tmp_path, fast_generation=True, args=dict(top_k=5, max_steps=1))
    assert tr.fast_reason and "fast generation off" in caplog.text, (tr.fast_reason, caplog.text)
