"""The docs hold together: the settings reference matches the Settings model, the architecture
map names every module, the README stays one page, and every link of every Markdown file
resolves (the file exists, the #anchor is one of its headings as GitHub slugs them)."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from controller.settings import ENV_PREFIX, Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SETTINGS = ROOT / "docs" / "user-guide" / "settings.md"
ARCHITECTURE = ROOT / "docs" / "design" / "architecture.md"
README_MAX_LINES = 200


def test_the_settings_reference_lists_every_setting_and_no_other() -> None:
    documented = set(re.findall(r"^\| `(COSCHEDULER_[A-Z_]+)` \|", SETTINGS.read_text(), re.M))
    expected = {ENV_PREFIX + name.upper() for name in Settings.model_fields}
    assert documented == expected, (
        f"missing from {SETTINGS.relative_to(ROOT)}: {sorted(expected - documented)}; "
        f"not settings: {sorted(documented - expected)}"
    )


def test_the_architecture_map_names_every_module() -> None:
    """docs/design/architecture.md is the newcomer's map: a module it does not name is a room
    missing from it."""
    doc = ARCHITECTURE.read_text()
    package = ROOT / "controller"
    missing = [
        str(path.relative_to(package))
        for path in sorted(package.rglob("*.py"))
        if path.name not in ("__init__.py", "__main__.py") and path.name not in doc
    ]
    assert not missing, f"{ARCHITECTURE.relative_to(ROOT)} does not name {missing}"


def test_the_readme_is_one_page() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines, at most {README_MAX_LINES}"


def test_every_docs_page_stays_readable() -> None:
    """A page of docs/ past 500 lines is several pages: split it."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "docs").rglob("*.md")
            if (n := len(p.read_text().splitlines())) >= 500}
    assert not long, f"pages of 500 lines or more: {long}"


# --- links -------------------------------------------------------------------------------------

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
# [text](target) and ![alt](target); the target may be <bracketed> and may carry a "title".
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)", re.M)
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.I)
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository: tracked, or new and not ignored (a file written
    but not committed yet is checked too); without git, every one outside build output."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--", "*.md"],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout.decode()
        paths = {ROOT / p for p in out.split("\0") if p}
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "build", "node_modules"}
        paths = {p for p in ROOT.rglob("*.md") if not skip & set(p.relative_to(ROOT).parts)}
    return sorted(p for p in paths if p.is_file())


def prose_lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines outside fenced code blocks, with their numbers, inline code blanked."""
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1) == fence:
                fence = ""
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, INLINE_CODE.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: the text as rendered (links by their text, code by its
    content, emphasis dropped), lower-cased, every character but letters, digits, spaces,
    hyphens and underscores dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("`", "").lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page offers: its headings' slugs (a repeated one numbered -1, -2 as
    GitHub does) and any explicit <a id> or <a name>."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(text: str) -> Iterator[tuple[int, str]]:
    for number, line in prose_lines(text):
        for pattern in (INLINE_LINK, REFERENCE_DEF, HTML_LINK):
            for target in pattern.findall(line):
                yield number, target.strip("<>")


def link_problem(source: Path, target: str, pages: dict[Path, set[str]]) -> str | None:
    """What is wrong with one link of a page, or None."""
    parts = urlsplit(target)
    if parts.scheme in ("http", "https"):
        host = parts.hostname or ""
        if " " in target or not ("." in host or host == "localhost"):
            return "not a well-formed URL"
        return None  # not fetched: CI has no network
    if parts.scheme == "mailto":
        return None if "@" in parts.path else "not an e-mail address"
    if parts.scheme or parts.netloc:
        return f"a scheme links do not use here ({parts.scheme or '//'})"
    if not parts.path and not parts.fragment:
        return "empty"
    path = unquote(parts.path)
    if not path:
        resolved = source
    else:
        resolved = (ROOT / path.lstrip("/") if path.startswith("/") else source.parent / path)
        resolved = resolved.resolve()
        if not resolved.is_relative_to(ROOT):
            return "outside the repository"
        if not resolved.exists():
            return f"no file {resolved.relative_to(ROOT)}"
    if parts.fragment:
        if resolved.suffix != ".md" or resolved.is_dir():
            return "an #anchor on something that is not a Markdown page"
        if resolved not in pages:
            pages[resolved] = anchors(resolved.read_text())
        if unquote(parts.fragment) not in pages[resolved]:
            return f"no heading #{parts.fragment} in {resolved.relative_to(ROOT)}"
    return None


def broken_links(sources: dict[Path, str]) -> list[str]:
    """Each link of each page (path: text) that does not resolve, with where it is."""
    pages = {path.resolve(): anchors(text) for path, text in sources.items()}
    broken = []
    for source, text in sources.items():
        source = source.resolve()
        for number, target in links(text):
            problem = link_problem(source, target, pages)
            if problem:
                broken.append(f"{source.relative_to(ROOT)}:{number}: ({target}) {problem}")
    return broken


def test_every_link_of_every_markdown_file_resolves() -> None:
    files = markdown_files()
    assert README in files and len(files) > 5, files
    broken = broken_links({path: path.read_text() for path in files})
    assert not broken, "broken links:\n" + "\n".join(broken)


@pytest.mark.parametrize(("heading", "anchor"), [
    ("Beside Tekton's assistant", "beside-tektons-assistant"),
    ("`config.capacity.anchor` and *warm* anchors", "configcapacityanchor-and-warm-anchors"),
    ("Upgrade, roll back, uninstall", "upgrade-roll-back-uninstall"),
    ("What stays behind (and how to remove it)", "what-stays-behind-and-how-to-remove-it"),
    ("A [linked](x.md) heading: 1.36+", "a-linked-heading-136"),
    ("snake_case stays", "snake_case-stays"),
])
def test_slugs_follow_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_a_broken_link_is_found() -> None:
    """The checker itself can fail: a missing file, a missing anchor, a malformed URL; a link
    inside code is not a link."""
    page = ROOT / "docs" / "_link_check_probe.md"  # not written: its text is given
    broken = broken_links({page: (
        "# Probe\n\n## Twice\n\n## Twice\n\n"
        "[ok](#probe) [ok](#twice-1) [ok](../README.md) [ok](https://tekton.dev/docs)\n"
        "[gone](no-such-page.md) [anchor](../README.md#no-such-heading) [url](https://)\n"
        "`[code](not-a-link.md)`\n\n```\n[fenced](not-a-link-either.md)\n```\n"
    )})
    assert [b.split(" ", 1)[0] for b in broken] == [
        "docs/_link_check_probe.md:8:", "docs/_link_check_probe.md:8:",
        "docs/_link_check_probe.md:8:",
    ], broken
    assert "no-such-page.md" in broken[0] and "no-such-heading" in broken[1], broken
