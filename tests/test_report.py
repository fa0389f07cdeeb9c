"""The report of a micro grid, rendered by `race site` with the nbconvert fallback (Quarto when it exists); tests/test_site.py opens the same site in a browser."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from race_nb.report import render_report, report_pages

pytestmark = pytest.mark.xdist_group('report')  # its tests share an expensive fixture: one pytest-xdist worker runs them all

RACE = str(Path(sys.executable).with_name("race"))


def test_every_report_page_links_runs_and_hides_its_code(site_build):
    "`race site` with the fallback renderer: every report page's links resolve, its notebook ran without an error, its code is hidden, it wears the site's chrome, and no warning or raw front matter shows."
    site, stdout = site_build  # `race site`: the report's pages, three chapters, the API page
    pages = report_pages()
    assert f"site rendered with fallback: {len(pages) + 3 + 1} pages" in stdout
    for stem, title in pages:
        page = (site / f"{stem}.html").read_text()
        for href in re.findall(r'<a href="([^"#:]+\.html)"', page):  # every navigation link resolves, from the page's own folder
            assert ((site / stem).parent / href).exists(), (stem, href)
        nb = nbformat.read(site / "_executed" / f"{stem}.ipynb", as_version=4)
        errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
        assert not errors, (stem, errors)
        assert "def " not in page or "<pre" not in page.split("def ")[0][-50:]  # code is hidden
        assert '<header class="race-header">' in page and "race-footer" in page and ".race-toc" in page  # one site: chrome and stylesheet
        assert f'href="{"../" * stem.count("/")}{stem}.html" class=current>' in page
        text = re.sub(r"<(script|style)[^>]*>.*?</\1>", "", page, flags=re.S)  # what a reader sees, not the page's CSS and JS
        for bad in ("Warning", "Traceback", "jupyter.stderr", "skip_exec", "title: "):  # no warnings, stderr or raw front matter
            assert bad not in text, (stem, bad, text[max(0, text.find(bad) - 300):text.find(bad) + 200])


def test_the_grid_pages_show_figures_failed_cells_and_learning_curves(site_build):
    "The grid's pages embed every figure; the compute page shows failed cells as failed, with their error, and the learning curves."
    site, _ = site_build
    for stem in ("grid/compute", "grid/frontiers", "grid/shift", "grid/race", "reproduction"):  # every figure present, embedded
        assert 'src="data:image/png;base64,' in (site / f"{stem}.html").read_text(), stem
    compute = (site / "grid" / "compute.html").read_text()
    assert "4 cell(s) not done" in compute  # failed cells shown as failed, not zeros
    assert "too small for one step" in compute  # with their error
    assert "Learning curves" in compute and "No learning curves" not in compute  # trl's log history against FLOPs
    assert '<aside class="race-toc">' in compute and 'href="#Learning-curves"' in compute  # a table of contents per page
    assert "ratio" in (site / "method.html").read_text()


def test_the_race_page_reads_the_full_budget_and_the_committed_record(site_build):
    "`--full` reaches the RACE page: its validation, readable tables, the forest plot beside the full budget, no nan, and the frozen rule's committed record."
    site, _ = site_build
    race = (site / "grid" / "race.html").read_text()
    assert "Validated against the full-budget runs" in race and "accuracy on those" in race  # --full reaches the RACE page
    assert "contrast, high minus low [95%]" in race and "pilot contrast [95%]" in race  # readable tables (issue 53)
    assert race.count('src="data:image/png;base64,') >= 2, race.count('src="data:image/png')  # the forest plot with the full budget beside
    assert not re.search(r"<td[^>]*>\s*(nan|None)\s*</td>", race)  # no nan or None in a table
    assert "How far RACE's frozen rule has been tested" in race and "reliability of the frozen rule" in race  # the committed record


def test_the_site_opens_on_the_study_and_the_grid_has_its_own_menu(site_build):
    "The site's index is the study (the answer, the tiny world, the claims from the committed results); the grid's report is its own menu with an honest claims table."
    site, _ = site_build
    grid = (site / "grid" / "index.html").read_text()
    assert "What this grid found about the paper" in grid and "inconclusive" in grid  # the grid's claims table, honest about gaps
    index = (site / "index.html").read_text()  # the site opens on the study, from the committed results: the claims, the tiny world
    assert "The answer, in brief" in index and "The tiny world" in index and "results/tiny-topup" in index
    assert "Overview of the grid" in index and 'href="grid/index.html"' in index  # the grid's own report is its own menu


def test_every_page_reads_clean(site_build, report_runs):
    "Every page of the built site, as a reader sees it: no folder of the build machine, no NaN on a report page, no link markup printed as text, every report figure captioned."
    import os, tempfile
    from race_nb.core import project_root
    from race_nb.site import page_problems
    site, _ = site_build
    paths = [report_runs, site.parent, project_root(), os.environ.get("RACE_DATA_DIR", ""), tempfile.gettempdir() + "/", os.path.expanduser("~") + "/"]
    assert page_problems(site, paths) == []


@pytest.mark.skipif(shutil.which("quarto") is None, reason="Quarto is not installed on this machine (its installer needs the internet)")
def test_quarto_renders_the_report_where_it_is_installed(report_runs, tmp_path):
    index, renderer = render_report(report_runs, tmp_path / "site", renderer="quarto")
    assert renderer == "quarto" and index.exists()


def test_a_report_of_a_missing_runs_folder_is_a_clear_error(tmp_path):
    res = subprocess.run([RACE, "report", str(tmp_path / "missing")], capture_output=True, text=True)
    assert res.returncode == 1 and "no runs folder" in res.stderr
