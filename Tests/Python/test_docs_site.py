"""The documentation site (`make docs`, scripts/docs.sh; docs/ARCHITECTURE.md "Documentation site").

The link checker (scripts/check-site-links.py) on a tiny site made here; scripts/docs.sh without DocC on this
checkout's README and docs/, built into tmp_path; a broken link in a copy failing the staging and naming its page and
line; and the built site in headless Chromium (served by http.server on 127.0.0.1): the nav, a search, a code block's
copy button. DocC is not run here (it needs a debug build); `make docs` runs it and checks its entry pages.
"""

import functools
import http.server
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from test_dashboard import browser, wait  # noqa: F401  (the module's headless Chromium fixture)

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCS_SH = REPO_ROOT / "scripts" / "docs.sh"
BUILD_TIMEOUT_S = 120


def load_checker():
    spec = importlib.util.spec_from_file_location("check_site_links", REPO_ROOT / "scripts" / "check-site-links.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_site_links = load_checker()


def run_docs(*arguments):
    env = {**os.environ, "DOCC": "0"}
    return subprocess.run(["bash", str(DOCS_SH), "--no-docc", *arguments], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=BUILD_TIMEOUT_S)


# -- the link checker on a synthetic site ----------------------------------------------------------------


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def synthetic_site(root, body):
    write(root / "index.html", f'<html><body><h1 id="top">Top</h1>{body}</body></html>')
    write(root / "guide" / "index.html", '<html><body><h2 id="setup">Setup</h2><a href="../#top">up</a></body></html>')
    write(root / "assets" / "site.css", "body {}")
    return root


def test_checker_passes_good_links_and_lists_external_ones(tmp_path):
    site = synthetic_site(tmp_path, '<link rel="stylesheet" href="assets/site.css"><a href="guide/">g</a>'
                                    '<a href="guide/index.html#setup">s</a><a href="#top">t</a>'
                                    '<a href="https://example.org/x">out</a><a href="mailto:a@b">m</a>')
    broken, external = check_site_links.check(site)
    assert broken == []
    assert external == ["https://example.org/x"]


def test_checker_reports_a_missing_page(tmp_path):
    site = synthetic_site(tmp_path, '<a href="nowhere/">n</a><img src="img/missing.png">')
    broken, _ = check_site_links.check(site)
    assert broken == ["index.html: nowhere/: no such file nowhere",
                      "index.html: img/missing.png: no such file img/missing.png"]


def test_checker_reports_a_missing_anchor(tmp_path):
    site = synthetic_site(tmp_path, '<a href="guide/#install">i</a><a href="#bottom">b</a>')
    broken, _ = check_site_links.check(site)
    assert broken == ["index.html: guide/#install: no element with id 'install' in guide/index.html",
                      "index.html: #bottom: no element with id 'bottom' in index.html"]


def test_checker_refuses_resources_from_the_network(tmp_path):
    site = synthetic_site(tmp_path, '<script src="https://cdn.example.org/x.js"></script>'
                                    '<link rel="stylesheet" href="//fonts.example.org/css">')
    broken, _ = check_site_links.check(site)
    assert [line.split(": ")[-1] for line in broken] == ["loaded from the network as the page is read"] * 2


def test_checker_skips_inside_a_prefix_but_requires_its_entry_pages(tmp_path):
    site = synthetic_site(tmp_path, '<a href="api/documentation/m/">api</a>')
    write(tmp_path / "api" / "documentation" / "m" / "index.html", '<a href="/api/js/routed-by-script.js">x</a>')
    assert check_site_links.check(site, skips=["api/"], required=["api/documentation/m/index.html"])[0] == []
    broken, _ = check_site_links.check(site, skips=["api/"], required=["api/documentation/other/index.html"])
    assert broken == ["api/documentation/other/index.html: api/documentation/other/index.html: required page missing"]


def test_checker_command_exits_1_naming_each_broken_link(tmp_path):
    site = synthetic_site(tmp_path, '<a href="guide/#install">i</a>')
    result = subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "check-site-links.py"), str(site)],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1, result.stdout
    assert "index.html: guide/#install: no element with id 'install' in guide/index.html" in result.stdout


# -- scripts/docs.sh --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """This checkout's README and docs/ built by scripts/docs.sh --no-docc into a temporary folder."""
    out = tmp_path_factory.mktemp("docs")
    result = run_docs("--out", str(out))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken links" in result.stdout, result.stdout
    return out / "site"


def test_docs_sh_builds_the_site_with_its_search_index(built_site):
    assert (built_site / "index.html").is_file()
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    home = [doc for doc in index["docs"] if doc["location"] in ("", "index.html")]
    assert home, "the README (index.md) is not in the search index"
    assert any("fault-injecting" in doc["text"].lower() or "faultline" in doc["text"].lower() for doc in home)
    # DocC skipped: its entry pages are placeholders, so the nav entry still resolves.
    assert "skipped" in (built_site / "api" / "documentation" / "index.html").read_text(encoding="utf-8")
    # No Google fonts, nothing loaded from another host.
    html = (built_site / "index.html").read_text(encoding="utf-8")
    assert "fonts.googleapis" not in html and "fonts.gstatic" not in html
    assert 'data-md-component="source"' not in html


def copy_of_checkout(root):
    """A checkout to build from: README.md, mkdocs.yml and docs/ copied (so they can be edited), everything else
    a symbolic link to this checkout's (the staging checks that links to Sources/, LICENSE, … exist)."""
    root.mkdir()
    for entry in REPO_ROOT.iterdir():
        if entry.name in (".git", ".build"):
            continue
        if entry.name == "docs":
            shutil.copytree(entry, root / "docs", symlinks=False)
        elif entry.name in ("README.md", "mkdocs.yml"):
            shutil.copy(entry, root / entry.name)
        else:
            (root / entry.name).symlink_to(entry)
    return root


def test_a_broken_link_fails_the_build_naming_page_and_line(tmp_path):
    source = copy_of_checkout(tmp_path / "checkout")
    page = source / "docs" / "PORTABILITY.md"
    lines = page.read_text(encoding="utf-8").split("\n")
    lines.insert(2, "See [the missing file](../Sources/NoSuchFolder/Nothing.swift) and [a page](nowhere.md).")
    page.write_text("\n".join(lines), encoding="utf-8")
    result = run_docs("--source", str(source), "--out", str(tmp_path / "out"))
    assert result.returncode != 0
    assert "docs/PORTABILITY.md:3: link ../Sources/NoSuchFolder/Nothing.swift: no Sources/NoSuchFolder/Nothing.swift " \
           "in the repository" in result.stderr, result.stderr
    assert "docs/PORTABILITY.md:3: link nowhere.md: no docs/nowhere.md in docs/" in result.stderr, result.stderr
    assert not (tmp_path / "out" / "site").exists()


def test_a_missing_anchor_fails_the_strict_build(tmp_path):
    source = copy_of_checkout(tmp_path / "checkout")
    page = source / "docs" / "PORTABILITY.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nBack to [the install](../README.md#no-such-heading).\n",
                    encoding="utf-8")
    result = run_docs("--source", str(source), "--out", str(tmp_path / "out"))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "PORTABILITY" in output and "no-such-heading" in output, output


# -- the site in a browser --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site_url(built_site):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *arguments):
        pass


def test_the_site_in_a_browser_has_nav_search_and_copy_buttons(browser, site_url, tmp_path):  # noqa: F811
    browser.get(site_url)
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link"),
         message="no navigation")
    titles = [link.get_attribute("textContent").strip()
              for link in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a.md-nav__link")]
    assert "Architecture" in titles and "API reference (Swift)" in titles, titles
    # Material adds a copy button to each code block from its script (.md-code__button in 9.8).
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".md-code__button, button.md-clipboard"), message="no copy button")
    shot = tmp_path / "docs-site.png"
    # Search: the box opens on a click; results come from search/search_index.json through a web worker.
    browser.find_element(By.TAG_NAME, "body").send_keys("/")  # material's shortcut: focus the search box
    box = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "input.md-search__input"))
    wait(browser, lambda d: box.is_displayed(), message="the search box never opened")
    box.send_keys("scenario")
    box.send_keys(Keys.SPACE)
    results = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".md-search-result__item"),
                   message="no search result for 'scenario'")
    assert results
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
