"""The docs stay reference: short enough to read, and every benchmark they quote is a script that exists."""

from __future__ import annotations

import re

from conftest import REPO


def test_the_front_door_and_the_benchmarks_page_stay_short():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 100
    assert len((REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8").splitlines()) <= 150


def test_every_benchmark_the_docs_quote_exists():
    quoted = set()
    for page in [REPO / "README.md", *(REPO / "docs").glob("*.md")]:
        text = page.read_text(encoding="utf-8")
        quoted |= set(re.findall(r"benchmarks/(\w+\.py)", text))
        quoted |= {name for name in re.findall(r"`(\w+\.py)(?: [^`]*)?`", text) if name.startswith(("serve_", "cold_"))}
    assert quoted, "no benchmark quoted"
    missing = sorted(name for name in quoted if not (REPO / "benchmarks" / name).is_file())
    assert missing == []
