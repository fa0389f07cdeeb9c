"""Every number in the results folders' READMEs that report the study is computed: each README's computed part equals what `race_nb.reproduction.results_readme` computes from the committed files now."""
from race_nb.reproduction import README_FOLDERS, results_readme, write_readmes
from race_nb.core import project_root


def test_results_readmes_are_computed():
    stale = write_readmes(check=True)
    assert not stale, f"results/{{{','.join(stale)}}}/README.md differ from what the code computes: run `make results-readmes` and commit"
    for f in README_FOLDERS:  # and no number that says nothing
        text = (project_root() / "results" / f / "README.md").read_text()
        assert "nan" not in text.lower().replace("nanmean", ""), f
        assert results_readme(f) in text


README_ANSWER = {  # each claim of the study as the README's answer names it, and the verdict it gives it
    "best rho on the native reward, rule-based feedback": ("inconclusive", "the best rho under rule-based feedback"),
    "best rho on the native reward, model-based feedback": ("reproduced", "the best rho under model-based (PRM) feedback"),
    "model-based feedback moves the best rho down (rule minus model)": ("inconclusive", "the reward-system shift"),
    "targets disagree: pass@1 best at high update, judge at medium update (dense / PRM)": ("not reproduced", "target disagreement"),
    "model size and allocation are coupled at a fixed budget (best arm per size)": ("inconclusive", "model size coupled with allocation"),
    "RACE's pilot names the regime (pass@1)": ("inconclusive", "a negative result for RACE"),
    "no guaranteed held-out gain from the recommended arm": ("inconclusive", "the held-out gain"),
}


def test_readme_answer_is_the_computed_one():
    "The README's answer to the paper (its opening) says what the site computes: the verdict counts, and each claim under its verdict."
    import re
    from race_nb.reproduction import study_claims, verdict_counts
    claims = study_claims()
    readme = (project_root() / "README.md").read_text()
    answer = readme.split("## The answer, at the tiny scale", 1)[1].split("\n## ", 1)[0]
    assert f"**{verdict_counts(claims)}**" in answer, answer[:600]
    said = {}
    for m in re.finditer(r"^- \*([a-z ]+)\*(.*?)(?=^- |^\S|\Z)", answer, flags=re.M | re.S): said.setdefault(m.group(1), "")
    for m in re.finditer(r"^- \*([a-z ]+)\*(.*?)(?=^- |^\S|\Z)", answer, flags=re.M | re.S): said[m.group(1)] += m.group(2)
    for _, r in claims.iterrows():
        if r.claim not in README_ANSWER: continue
        verdict, phrase = README_ANSWER[r.claim]
        assert r.verdict.split(" (")[0] == verdict, (r.claim, r.verdict, "the README's answer says", verdict)
        assert phrase in said.get(verdict, ""), (phrase, verdict, said)
