"""docs/capacity.md shows real output: re-run its python blocks and compare the text blocks.

Blocks run from the repository root, so the worked examples on the published load-test tables
read them from ``../shared/data`` (never copied into the repository); without that folder the
blocks from the first one that reads it on are left out.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "capacity.md"
SHARED_DATA = "../shared/data"
BLOCK = re.compile(r"```python\n(.*?)```\n```text\n(.*?)```\n", re.S)


def test_every_documented_output_is_what_the_code_prints(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 15
    have_data = (ROOT / SHARED_DATA).is_dir()
    namespace: dict = {}
    for code, expected in blocks:
        if SHARED_DATA in code and not have_data:
            break
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert printed.getvalue().rstrip("\n") == expected.rstrip("\n"), code
