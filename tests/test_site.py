"""The site - report pages, executed chapters, the API page - opened in headless Chromium (Debian's `chromium`, driven
by Playwright without its own browser download): every page reached by following every navigation link from the index,
no console errors or failed requests, every image decoded, every table rendered, math as MathML, screenshots saved.

`RACE_SITE=_site pytest tests/test_site.py` checks a site built by `make site` instead of building a small one;
`RACE_SITE_SHOTS=DIR` keeps the screenshots. Without Chromium or playwright the test is skipped with its reason (failed where
RACE_REQUIRE_BROWSER=1, as in CI)."""
import os
import re
import shutil
import urllib.parse
from pathlib import Path

import pytest

pytestmark = pytest.mark.xdist_group('report')  # its tests share an expensive fixture: one pytest-xdist worker runs them all

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the skip below says so
    sync_playwright = None

WHY_NOT = ("no Chromium on PATH (Debian: apt-get install chromium)" if BROWSER is None else
           "playwright is not installed (pip install playwright; it drives the system browser, no download)" if sync_playwright is None else None)


@pytest.fixture(autouse=True)
def browser_or_skip():
    "Skip, saying why, without a browser; fail instead where one is required (CI sets RACE_REQUIRE_BROWSER=1)."
    if WHY_NOT and os.environ.get("RACE_REQUIRE_BROWSER") == "1": pytest.fail(f"RACE_REQUIRE_BROWSER=1 but {WHY_NOT}")
    if WHY_NOT: pytest.skip(WHY_NOT)

PAGE_INFO = """() => ({
  nav: [...document.querySelectorAll('header a[href]')].map(a => a.href),
  images: [...document.images].map(i => [i.currentSrc.slice(0, 48), i.complete && i.naturalWidth > 0]),
  tables: document.querySelectorAll('main table').length,
  math: document.querySelectorAll('main math').length,
  text: (document.querySelector('main') || document.body).innerText.length,
})"""


def visit_site(site: Path, shots: Path) -> dict:
    "Open the index and every page its navigation links reach, recursively; return what each page showed."
    seen, todo = {}, [(site / "index.html").resolve()]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=BROWSER, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems = []
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
        while todo:
            path = todo.pop(0)
            if path in seen: continue
            assert path.is_file(), f"a navigation link leads to a missing page: {path}"
            problems.clear()
            page.goto(path.as_uri(), wait_until="load")
            info = page.evaluate(PAGE_INFO)
            info["problems"] = list(problems)
            rel = path.relative_to(site.resolve())
            shot = shots / (str(rel.with_suffix("")).replace("/", "__") + ".png")
            page.screenshot(path=str(shot))
            info["screenshot"] = shot
            seen[path] = info
            for href in info["nav"]:
                url = urllib.parse.urlparse(href)
                assert url.scheme == "file", f"{rel}: navigation leaves the site: {href}"
                todo.append(Path(urllib.parse.unquote(url.path)).resolve())
        page.goto((site / "index.html").resolve().as_uri())
        chapters = page.locator(".race-menu", has=page.locator(".race-menu-label", has_text="Chapters"))
        chapters.locator(".race-menu-label").hover()  # the Chapters menu opens on hover and lists the chapters
        menu = chapters.locator(".race-menu-items a")
        assert menu.first.is_visible() and menu.count() == len(list((site / "chapters").glob("*.html")))
        grid = page.locator(".race-menu", has=page.locator(".race-menu-label", has_text="This grid"))
        grid.locator(".race-menu-label").hover()  # the grid's own report is its own menu, named after the grid
        assert grid.locator(".race-menu-items a").count() == len(list((site / "grid").glob("*.html")))
        page.screenshot(path=str(shots / "index__chapters_menu_open.png"))
        browser.close()
    return seen


@pytest.fixture(scope="module")
def site(request):
    "The site `make site` built (RACE_SITE), or conftest's `race site` build of a micro grid with three chapters."
    if os.environ.get("RACE_SITE"): return Path(os.environ["RACE_SITE"])
    return request.getfixturevalue("site_build")[0]


def test_the_site_reads_and_navigates_in_chromium(site, tmp_path):
    shots = Path(os.environ.get("RACE_SITE_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    seen = visit_site(site, shots)
    every = {p.resolve() for p in site.rglob("*.html") if "_executed" not in p.parts}
    assert set(seen) == every, f"pages no navigation link reaches: {sorted(every - set(seen))}"
    for path, info in seen.items():
        rel = path.relative_to(site.resolve())
        assert not info["problems"], (str(rel), info["problems"])
        assert all(ok for _, ok in info["images"]), (str(rel), [src for src, ok in info["images"] if not ok])
        assert info["tables"] == len(re.findall(r"<table\b", path.read_text().split("<main>", 1)[-1])), str(rel)  # every table rendered
        assert info["text"] > 300, (str(rel), "a page with (almost) nothing on it")
        assert info["screenshot"].stat().st_size > 10_000, str(rel)
    by = {str(p.relative_to(site.resolve())): i for p, i in seen.items()}
    for page in ("index.html", "grid/index.html", "grid/compute.html", "grid/race.html", "reproduction.html"): assert by[page]["tables"] > 0, page  # the report's tables
    for page in ("grid/compute.html", "grid/frontiers.html", "grid/index.html"): assert by[page]["images"], page  # and its figures (the grid's overview opens with one)
    assert by["index.html"]["tables"] >= 3  # the study on the front page: the tiny world, the claims, the folders side by side
    assert len(by["reproduction.html"]["images"]) >= 4 and by["reproduction.html"]["tables"] >= 5  # the committed runs' shift, size, RACE and sign
    assert by["chapters/01_flops.html"]["math"] > 10 and by["chapters/01_flops.html"]["tables"] > 0  # TeX as MathML; the chapter's tables
    assert by["chapters/09_report.html"]["images"], "the report chapter's figures"
    assert by["api.html"]["text"] > 5000
    api = (site / "api.html").read_text()
    assert 'href="chapters/01_flops.html#cell-id=' in api and "per_token_table" in api
    flops = (site / "chapters" / "01_flops.html").read_text()
    cell = re.search(r'href="chapters/01_flops.html#cell-id=(\w+)"', api).group(1)
    assert f'id="cell-id={cell}"' in flops  # the API's link lands on the defining cell
    assert "#| export" not in flops and '<span class="nf">per_token_table</span>' in flops  # chapters show their code, without directives
