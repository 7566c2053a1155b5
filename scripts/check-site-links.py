#!/usr/bin/env python3
"""Checks the links of a built static site (scripts/docs.sh; docs/ARCHITECTURE.md "Documentation site").

Usage: scripts/check-site-links.py SITE [--skip PREFIX]... [--require PATH]...

For every .html file under SITE, each `href` and `src` (a, link, script, img, source, iframe; no fetching):
  - a relative or site-absolute link must name a file in SITE (a folder: its index.html), and its #fragment an
    element whose id (or an <a name>) is in the target page, the same page for a bare #fragment;
  - a link to another host (http, https, //host) is listed at the end, not fetched; one that the page would load
    as it is read (a script, a stylesheet, an image, a frame) is broken: the site must need no network;
  - mailto:, tel:, data: and javascript: are left alone.
Pages under a --skip PREFIX (a folder relative to SITE, e.g. api/: DocC's pages, routed by its own JavaScript) are
not read, and links into them are checked for the file only, not for fragments; a --require PATH must exist (an
entry page of such a folder). Each broken link is printed as `page: link: reason`; exit 1 if there is any.
"""

import argparse
import posixpath
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

LOADED = {("script", "src"), ("link", "href"), ("img", "src"), ("source", "src"), ("iframe", "src"),
          ("video", "src"), ("audio", "src"), ("embed", "src"), ("input", "src")}
LEFT_ALONE = {"mailto", "tel", "data", "javascript", "about", "blob"}


class PageParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (tag, attribute, value, rel)

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if tag == "a" and attributes.get("name"):
            self.ids.add(attributes["name"])
        for name in ("href", "src"):
            value = attributes.get(name)
            if value is not None:
                self.links.append((tag, name, value.strip(), (attributes.get("rel") or "").lower()))

    handle_startendtag = handle_starttag


def parse(path):
    parser = PageParser()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


def loads_at_view(tag, attribute, rel):
    if (tag, attribute) not in LOADED:
        return False
    if tag == "link":
        return any(word in rel.split() for word in ("stylesheet", "icon", "preload", "modulepreload", "manifest"))
    return True


def check(site, skips=(), required=()):
    """(broken, external): broken is a list of `page: link: reason`, external the sorted set of outside links."""
    site = Path(site).resolve()
    skips = tuple(prefix.strip("/") + "/" for prefix in skips)
    broken, external = [], set()
    pages = {}

    def page_ids(relative):
        if relative not in pages:
            pages[relative] = parse(site / relative).ids
        return pages[relative]

    def skipped(relative):
        return any(relative.startswith(prefix) for prefix in skips)

    for path in sorted(site.rglob("*.html")):
        relative = path.relative_to(site).as_posix()
        if skipped(relative):
            continue
        parser = parse(path)
        pages[relative] = parser.ids
        for tag, attribute, value, rel in parser.links:
            if not value:
                continue
            parts = urlsplit(value)
            scheme = parts.scheme.lower()
            if scheme in LEFT_ALONE:
                continue
            if scheme or value.startswith("//"):
                if scheme not in ("http", "https", ""):
                    broken.append(f"{relative}: {value}: unknown scheme {scheme}")
                    continue
                external.add(value)
                if loads_at_view(tag, attribute, rel):
                    broken.append(f"{relative}: {value}: loaded from the network as the page is read")
                continue
            target_path = unquote(parts.path)
            if not target_path:
                target = relative
            elif target_path.startswith("/"):
                target = posixpath.normpath(target_path.lstrip("/")) if target_path.strip("/") else "."
            else:
                target = posixpath.normpath(posixpath.join(posixpath.dirname(relative), target_path))
            if target == ".." or target.startswith("../"):
                broken.append(f"{relative}: {value}: outside the site")
                continue
            file = site / target
            if file.is_dir() or target == ".":
                file = file / "index.html"
                target = posixpath.join(target, "index.html") if target != "." else "index.html"
            if not file.is_file():
                broken.append(f"{relative}: {value}: no such file {target}")
                continue
            fragment = unquote(parts.fragment)
            if not fragment or not target.endswith(".html") or skipped(target):
                continue
            if fragment not in page_ids(target):
                broken.append(f"{relative}: {value}: no element with id {fragment!r} in {target}")

    for path in required:
        if not (site / path).is_file():
            broken.append(f"{path}: {path}: required page missing")
    return broken, sorted(external)


def main():
    arguments = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arguments.add_argument("site")
    arguments.add_argument("--skip", action="append", default=[], metavar="PREFIX")
    arguments.add_argument("--require", action="append", default=[], metavar="PATH")
    options = arguments.parse_args()
    if not Path(options.site).is_dir():
        sys.exit(f"check-site-links: no site at {options.site}")
    broken, external = check(options.site, options.skip, options.require)
    pages = sum(1 for _ in Path(options.site).rglob("*.html"))
    if external:
        print(f"check-site-links: {len(external)} external links (not fetched):")
        for link in external:
            print(f"  {link}")
    for line in broken:
        print(line)
    print(f"check-site-links: {pages} pages, {len(broken)} broken links")
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
