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
