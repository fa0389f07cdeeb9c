"""Loaders on the shared real data, the arithmetic task's splits, the tokenizer and offline errors."""
import json

import pytest

from race_nb.data import ARITH_SPECS, arith_records, extract_answer, grade, load_records
from race_nb.models import char_tokenizer, check_alphabet, load_policy, load_tokenizer, resolve_weights

from conftest import SHARED
needs_data = pytest.mark.usefixtures("shared_data")


@needs_data
@pytest.mark.parametrize("name,split,n", [("gsm8k", "train", 7473), ("gsm8k", "test", 1319), ("math500", "test", 500)])
def test_gsm8k_and_math500_load_every_record_with_a_unique_id(name, split, n):
    recs = load_records(name, split, data_dir=SHARED)
    assert len(recs) == n and len({r["id"] for r in recs}) == n
    assert all(r["prompt"] and r["answer"] and r["solution"] for r in recs)


@needs_data
def test_gsm8k_gold_solutions_grade_correct():
    recs = load_records("gsm8k", "test", data_dir=SHARED)
    assert sum(grade(r["solution"], r["answer"], "gsm8k") for r in recs) == 1319


def test_a_polaris_file_in_its_plain_jsonl_format_loads(tmp_path):
    (tmp_path / "polaris").mkdir()
    rows = [{"problem": "Compute $1+1$.", "answer": "2"}, {"problem": "Half of 1?", "answer": "\\frac{1}{2}"}]
    (tmp_path / "polaris" / "part-0.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    recs = load_records("polaris", "train", data_dir=tmp_path)
    assert [r["answer"] for r in recs] == ["2", "\\frac{1}{2}"]
    assert grade("so it is \\boxed{0.5}", recs[1]["answer"], "polaris")


def test_missing_data_says_what_and_where(tmp_path, monkeypatch):
    monkeypatch.delenv("RACE_DATA_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="RACE_DATA_DIR"):
        load_records("gsm8k", "test")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "math500" / "test.jsonl")):
        load_records("math500", "test", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no polaris files"):
        load_records("polaris", "train", data_dir=tmp_path)
    with pytest.raises(ValueError, match="valid: train, test"):
        load_records("gsm8k", "validation", data_dir=tmp_path)


def test_a_hub_dataset_is_refused_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(RuntimeError, match="HF_HUB_OFFLINE"):
        load_records("gsm8k", "test", data_dir=tmp_path, hub=True)
    with pytest.raises(RuntimeError, match="pass path="):
        load_policy("qwen2.5-1.5b")
    with pytest.raises(FileNotFoundError, match="no weights"):
        resolve_weights("qwen2.5-3b", tmp_path / "missing")


def test_arith_splits_disjoint_and_deterministic():
    splits = {s: arith_records(s) for s in ARITH_SPECS}
    held_out = {r["prompt"] for s in ("test_id", "test_ood") for r in splits[s]}
    assert not held_out & {r["prompt"] for r in splits["train"] + splits["pretrain"]}
    assert arith_records("train", n=100, seed=0) == splits["train"][:100]
    assert arith_records("train", n=100, seed=1) != splits["train"][:100]
    assert all(grade(r["solution"], r["answer"], "arith") for s in splits.values() for r in s)


def test_tokenizer_round_trip_and_reload(tmp_path):
    tok = char_tokenizer()
    for s in ARITH_SPECS:
        for r in arith_records(s, n=300):
            text = check_alphabet(r["prompt"] + r["solution"])
            assert tok.decode(tok(text)["input_ids"]) == text
    tok.save_pretrained(tmp_path)
    back = load_tokenizer(tmp_path)
    assert back.padding_side == "left" and back.pad_token_id == 0 and back.eos_token_id == 1
    with pytest.raises(ValueError, match="'x'"):
        check_alphabet("Q: 3x4")


def test_answer_extraction_handles_empty_and_marked_answers():
    assert extract_answer("") is None and extract_answer(None) is None
    assert extract_answer("#### -12\nextra", task="arith") == "-12"  # the chains' format: the marker's line, wherever it is
    assert extract_answer("#### -12\nextra") is None  # math text: a #### line followed by more text is not the final answer
    assert extract_answer("#### Step 3: add\n\\boxed{5}") == "5"  # a heading never wins over \boxed{}
    assert extract_answer("\\boxed{\\frac{1}{\\sqrt{2}}}") == "\\frac{1}{\\sqrt{2}}"
    assert not grade("", "3", "arith") and not grade("#### abc", "3", "arith")
