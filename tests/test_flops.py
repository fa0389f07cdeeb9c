"""ModelFlops against FlopCounterMode (eager attention), for every family it counts, and the ledger's error handling."""
import math

import pytest

from race_nb.flop_check import CHECKS, TINY_CHECK_CONFIGS, validate_flops
from race_nb.flops import LoraSpec, ModelFlops
from race_nb.ledger import FlopsLedger


@pytest.mark.parametrize("name", sorted(TINY_CHECK_CONFIGS))
def test_tiny_configs_match_flop_counter(name):
    """Every family: parameters, forward (logits everywhere, last only), generate (KV cache, past the sliding windows), LoRA
    fwd+bwd (with and without gradient checkpointing), full fine-tune fwd+bwd and a reward model's scoring, within 1%."""
    res = validate_flops(TINY_CHECK_CONFIGS[name], batch=3, seq_len=9, new_tokens=5)
    assert list(res.check) == list(CHECKS)
    assert res.ratio.between(0.99, 1.01).all(), res


@pytest.mark.parametrize("lora,keep", [(LoraSpec(4, ("q_proj", "v_proj")), 3),
                                       (LoraSpec(2, ("gate_proj", "up_proj", "down_proj")), 0),
                                       (LoraSpec(8, ("o_proj",)), 4)])
def test_partial_lora_targets_match(lora, keep):
    """Partial adapters change which first-layer gradients autograd computes; the model follows it."""
    res = validate_flops(TINY_CHECK_CONFIGS["gqa-untied"], lora=lora, logits_to_keep=keep, checks=("train_lora",))
    assert res.ratio.between(0.99, 1.01).all(), res


def test_qwen25_15b_on_meta_device():
    """Paper scale without weights: forward and LoRA training of Qwen2.5-1.5B within 1%."""
    res = validate_flops("qwen2.5-1.5b", lora=LoraSpec(64), batch=2, seq_len=128, logits_to_keep=64,
                         device="meta", checks=("forward", "train_lora"))
    assert len(res) == 2 and res.ratio.between(0.99, 1.01).all(), res


def test_generation_costs_more_than_prefill_and_grows_with_length():
    m = ModelFlops.from_config(TINY_CHECK_CONFIGS["gqa-untied"])
    assert m.generate(4, 10, 1) == m.forward(4, 10, logits="last")
    assert m.generate(4, 10, 20) > m.generate(4, 10, 10) > m.generate(4, 10, 1)


@pytest.mark.parametrize("call,msg", [
    (lambda m: m.forward(0, 8), "batch must be a positive integer"),
    (lambda m: m.forward(2, -3), "seq_len must be a positive integer"),
    (lambda m: m.forward(2, 8, logits="first"), "logits must be"),
    (lambda m: m.generate(2, 8, 0), "new_tokens must be a positive integer"),
    (lambda m: m.train_step(2.5, 8), "batch must be a positive integer"),
])
def test_bad_shapes_raise_value_error(call, msg):
    with pytest.raises(ValueError, match=msg):
        call(ModelFlops.from_config(TINY_CHECK_CONFIGS["mha-tied"]))


@pytest.mark.parametrize("build,msg", [
    (lambda: ModelFlops.from_config(dict(model_type="gpt2", architectures=["GPT2LMHeadModel"])), "FAMILIES"),  # how to add one
    (lambda: ModelFlops.from_config(dict(model_type="gemma3", text_config=dict(model_type="gemma3_text"))), "text_config"),
    (lambda: ModelFlops.from_config(dict(TINY_CHECK_CONFIGS["llama-gqa"], num_local_experts=4)), "mixture of experts"),
    (lambda: ModelFlops.from_config(TINY_CHECK_CONFIGS["phi3"], lora=LoraSpec(4, ("q_proj",))), "no q_proj to adapt"),
    (lambda: ModelFlops.from_config(TINY_CHECK_CONFIGS["qwen3-moe"], lora=dict(r=4, target_modules=["q_proj"],
                                                                          target_parameters=["mlp.experts.gate_up_proj"])), "target_parameters"),
])
def test_what_the_ledger_cannot_count_is_refused_by_name(build, msg):
    with pytest.raises(ValueError, match=msg):
        build()


def test_a_folder_and_a_hub_config_count_the_same():
    """The raw config.json (no layer_types, the hub's num_experts) and transformers' loaded config give the same model."""
    from transformers import AutoConfig
    for c in TINY_CHECK_CONFIGS.values():
        assert ModelFlops.from_config(c) == ModelFlops.from_config(AutoConfig.for_model(**c))


def test_config_missing_field_names_it():
    cfg = dict(TINY_CHECK_CONFIGS["mha-tied"])
    del cfg["intermediate_size"]
    with pytest.raises(ValueError, match="intermediate_size"):
        ModelFlops.from_config(cfg)


def test_the_ledger_refuses_bad_budgets_and_events():
    with pytest.raises(ValueError, match="budget must be a positive"):
        FlopsLedger(budget=-1)
    led = FlopsLedger()
    with pytest.raises(ValueError, match="unknown component 'rollouts'"):
        led.record(0, "rollouts", "generate", 1.0)
    with pytest.raises(ValueError, match="cannot exceed"):
        led.record(0, "search", "generate", 1.0, useful_flops=2.0)
    assert len(led) == 0 and math.isnan(led.rho) and led.remaining == math.inf


def test_ledger_roundtrip_and_budget(tmp_path):
    m = ModelFlops.from_config(TINY_CHECK_CONFIGS["gqa-untied"], lora=LoraSpec(16))
    led = FlopsLedger(budget=5 * m.generate(8, 12, 40))
    step = 0
    while not led.exhausted:
        led.record(step, "search", "generate", m.generate(8, 12, 40), tokens=8 * 52)
        led.record(step, "learning", "update", m.train_step(8, 52, logits=41), tokens=8 * 52)
        step += 1
    per_step = m.train_step(8, 52, logits=41) + m.generate(8, 12, 40)
    assert step >= 2 and led.total - per_step < led.budget <= led.total  # stopped at the first boundary past it
    assert led.overshoot == pytest.approx(led.total - led.budget)
    expected = m.train_step(8, 52, logits=41) / per_step
    assert led.rho == pytest.approx(expected)
    back = FlopsLedger.load(led.save(tmp_path / "run" / "ledger.parquet"))
    assert back.budget == led.budget and back.to_frame().equals(led.to_frame())
    assert "rho" in back.compute_card()
    (tmp_path / "bad.parquet").write_bytes(b"not parquet")
    with pytest.raises(Exception):
        FlopsLedger.load(tmp_path / "bad.parquet")
