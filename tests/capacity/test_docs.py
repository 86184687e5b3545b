"""docs/capacity.md shows real output: re-run its python blocks and compare the text blocks."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"
BLOCK = re.compile(r"```python\n(.*?)```\n```text\n(.*?)```\n", re.S)


def test_every_documented_output_is_what_the_code_prints() -> None:
    blocks = BLOCK.findall(DOC.read_text())
    assert len(blocks) >= 15
    namespace: dict = {}
    for code, expected in blocks:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(DOC), "exec"), namespace)
        assert printed.getvalue().rstrip("\n") == expected.rstrip("\n"), code
