#!/usr/bin/env python3
"""Stages the documentation site's sources for scripts/docs.sh (docs/ARCHITECTURE.md "Documentation site").

Usage: scripts/docs-stage.py SOURCE OUT

SOURCE is a checkout (README.md, docs/, mkdocs.yml); OUT gets src/ (docs/ copied, symlinks followed; README.md as
index.md; placeholders api/documentation/index.html and api/documentation/MODULE/index.html for each module in
$DOCS_API_MODULES, which DocC's pages replace in the built site) and mkdocs.yml (INHERIT: SOURCE/mkdocs.yml, with
docs_dir OUT/src, site_dir OUT/site and the nav without the entries whose page does not exist yet, named on stderr;
with DOCS_REQUIRE_ALL_PAGES=1 such an entry fails the staging).

Links are written for GitHub, where the README links `docs/x.md` and a page in docs/ links `../README.md` or
`../Sources/...`. Each relative link in a page (inline `[t](url)`, a reference definition `[r]: url`, an HTML
`href="…"`/`src="…"`; not inside code) is resolved against the page's place in SOURCE:
  README.md           -> index.md (relative to the staged page)
  docs/PATH           -> PATH (the same file, staged)
  any other file      -> repo_url/blob/main/PATH (a folder: repo_url/tree/main/PATH)
A link whose target is not in the repository (git's tracked and untracked-but-not-ignored files, or the disk
when SOURCE is not a git checkout) fails the staging with `PAGE:LINE: link LINK: reason`, every one of them listed.
Links with a scheme, `#anchors` and absolute paths are left as they are; mkdocs --strict judges those.
"""

import json
import os
import posixpath
import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from mkdocs.utils.yaml import get_yaml_loader

FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
INLINE = re.compile(r"\]\(\s*(<[^>]*>|[^)\s]+)(\s+(\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ATTRIBUTE = re.compile(r"\b(?:href|src)\s*=\s*\"([^\"]*)\"")
PLACEHOLDER = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{module}: Swift API reference</title></head>
<body><h1>{module}</h1>
<p>The Swift API reference is made by DocC in <code>make docs</code>; this build skipped it (DOCC=0).</p></body></html>
"""
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


# A fence's words after the language are for Tests/Python/test_doc_samples.py; Python-Markdown's fences would take
# them for attributes and lose the rest of the page.
FENCE_ATTRIBUTES = re.compile(r"^(\s*```[\w-]+)[ \t]+[^\n`]*$", re.M)


def repository_files(source):
    """The repository's files as relative POSIX paths, and their folders."""
    listed = subprocess.run(["git", "-C", str(source), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            capture_output=True)
    if listed.returncode == 0 and (source / ".git").exists():
        files = {name for name in listed.stdout.decode().split("\0") if name}
    else:
        files = {(Path(folder) / name).relative_to(source).as_posix()
                 for folder, _, names in os.walk(source, followlinks=True) for name in names}
    folders = {posixpath.dirname(name) for name in files}
    for folder in list(folders):
        while folder:
            folder = posixpath.dirname(folder)
            folders.add(folder)
    return files, folders


def masked(line):
    """The line with its code spans blanked (same length), so a link inside `code` is not rewritten."""
    return CODE_SPAN.sub(lambda match: " " * len(match.group(0)), line)


def link_spans(text):
    """(line number, start, end, link) for each link in Markdown text, outside fenced code and code spans."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        opening = FENCE.match(line)
        if fence:
            if opening and opening.group(1)[0] == fence[0] and len(opening.group(1)) >= len(fence):
                fence = None
            continue
        if opening:
            fence = opening.group(1)
            continue
        visible = masked(line)
        spans = [(match.start(1), match.end(1)) for match in INLINE.finditer(visible)]
        spans += [(match.start(1), match.end(1)) for match in REFERENCE.finditer(visible)]
        spans += [(match.start(1), match.end(1)) for match in HTML_ATTRIBUTE.finditer(visible)]
        for start, end in sorted(spans):
            link = line[start:end]
            if link.startswith("<") and link.endswith(">"):
                start, end, link = start + 1, end - 1, link[1:-1]
            yield number, start, end, link


class Stager:
    def __init__(self, source, repo_url, files, folders):
        self.source = source
        self.repo_url = repo_url.rstrip("/")
        self.files = files
        self.folders = folders
        self.errors = []

    def rewrite(self, repo_path, site_path, text):
        """The page's text with its links rewritten; errors are collected in self.errors."""
        lines = text.split("\n")
        edits = {}
        for number, start, end, link in link_spans(text):
            new = self.target(repo_path, site_path, number, link)
            if new is not None and new != link:
                edits.setdefault(number, []).append((start, end, new))
        for number, changes in edits.items():
            line = lines[number - 1]
            for start, end, new in sorted(changes, reverse=True):
                line = line[:start] + new + line[end:]
            lines[number - 1] = line
        return "\n".join(lines)

    def target(self, repo_path, site_path, number, link):
        if not link or link.startswith("#") or link.startswith("/") or SCHEME.match(link):
            return None
        path, hash_, fragment = link.partition("#")
        path, query, _ = path.partition("?")
        if not path:
            return None
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(repo_path), path))
        if resolved == ".." or resolved.startswith("../"):
            self.errors.append(f"{repo_path}:{number}: link {link}: outside the repository")
            return None
        suffix = (("?" + query) if query else "") + hash_ + fragment
        if resolved == "README.md":
            staged = "index.md"
        elif resolved.startswith("docs/"):
            staged = resolved[len("docs/"):]
            if not (self.source / resolved).exists():
                self.errors.append(f"{repo_path}:{number}: link {link}: no {resolved} in docs/")
                return None
        elif resolved in self.files:
            return f"{self.repo_url}/blob/main/{resolved}{suffix}"
        elif resolved in self.folders or resolved == ".":
            return f"{self.repo_url}/tree/main/{'' if resolved == '.' else resolved}{suffix}".rstrip("/")
        else:
            self.errors.append(f"{repo_path}:{number}: link {link}: no {resolved} in the repository")
            return None
        relative = posixpath.relpath(staged, posixpath.dirname(site_path) or ".")
        if path.endswith("/") and not relative.endswith("/"):
            relative += "/"
        return relative + suffix


def nav_pages(nav, present, dropped, trail=""):
    """The nav without the entries whose page is neither in the staged sources nor a link; dropped gets their
    names."""
    kept = []
    for item in nav:
        if isinstance(item, dict):
            (title, value), = item.items()
            if isinstance(value, list):
                children = nav_pages(value, present, dropped, f"{trail}{title} / ")
                if children:
                    kept.append({title: children})
                continue
            if SCHEME.match(value) or value in present:
                kept.append(item)
            else:
                dropped.append(f"{trail}{title}: {value}")
        elif SCHEME.match(item) or item in present:
            kept.append(item)
        else:
            dropped.append(f"{trail}{item}")
    return kept


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    source = Path(sys.argv[1]).resolve()
    out = Path(sys.argv[2]).resolve()
    config_path = source / "mkdocs.yml"
    with open(config_path, encoding="utf-8") as file:
        loader = get_yaml_loader()
        # `!relative` (theme.custom_dir) is mkdocs' to resolve when it builds; here only nav and repo_url are read.
        loader.add_constructor("!relative", lambda loader, node: loader.construct_scalar(node))
        config = yaml.load(file, Loader=loader)
    repo_url = config.get("repo_url")
    if not repo_url:
        sys.exit(f"docs-stage: no repo_url in {config_path}")

    src = out / "src"
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(source / "docs", src, symlinks=False)

    files, folders = repository_files(source)
    stager = Stager(source, repo_url, files, folders)
    pages = [("README.md", "index.md")]
    pages += [(f"docs/{path.relative_to(src).as_posix()}", path.relative_to(src).as_posix())
              for path in sorted(src.rglob("*.md"))]
    for repo_path, site_path in pages:
        text = (source / repo_path).read_text(encoding="utf-8")
        text = FENCE_ATTRIBUTES.sub(r"\1", text)   # `json file=…`, `sh proven-by=…`: the sample runner's, not the site's
        (src / site_path).write_text(stager.rewrite(repo_path, site_path, text), encoding="utf-8")

    # DocC's pages are copied into the built site after mkdocs (scripts/docs.sh): until then, and for good when
    # DocC is skipped, each module's entry page is a placeholder, so that the nav and links to it resolve.
    modules = os.environ.get("DOCS_API_MODULES", "").split()
    for module in (["Faultline Swift API"] if modules else []) + modules:
        folder = () if " " in module else (module.lower(),)
        placeholder = src.joinpath("api", "documentation", *folder, "index.html")
        placeholder.parent.mkdir(parents=True, exist_ok=True)
        placeholder.write_text(PLACEHOLDER.format(module=module), encoding="utf-8")
    present = {path.relative_to(src).as_posix() for path in src.rglob("*") if path.is_file()}
    dropped = []
    nav = nav_pages(config.get("nav") or [], present, dropped)
    if dropped:
        print(f"docs-stage: {len(dropped)} nav entries left out, their pages are not there yet: "
              + ", ".join(entry.rsplit(": ", 1)[-1] for entry in dropped), file=sys.stderr)
    if dropped and os.environ.get("DOCS_REQUIRE_ALL_PAGES") == "1":
        stager.errors.append(f"{len(dropped)} nav entries have no page (DOCS_REQUIRE_ALL_PAGES=1)")

    if stager.errors:
        for error in stager.errors:
            print(f"docs-stage: broken link: {error}", file=sys.stderr)
        sys.exit(1)

    child = {"INHERIT": str(config_path), "docs_dir": str(src), "site_dir": str(out / "site"), "nav": nav}
    # The theme whole (INHERIT replaces it, not merges it), with custom_dir made absolute: relative, it would be read
    # beside the generated config.
    theme = dict(config.get("theme") or {})
    if theme.get("custom_dir"):
        theme["custom_dir"] = str(source / theme["custom_dir"])
        child["theme"] = theme
    (out / "mkdocs.yml").write_text(json.dumps(child, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
