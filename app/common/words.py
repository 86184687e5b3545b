"""Counted nouns in what gpucast prints: ``1 GPU``, ``2 GPUs``, ``1 mix``, ``3 mixes``."""

from __future__ import annotations


def count(n: float, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1 (``plural`` when the noun does not
    just take an ``s``). ``n`` is shown as given: an int as it is, a float with ``:g``."""
    shown = f"{n:g}" if isinstance(n, float) else str(n)
    return f"{shown} {noun if n == 1 else plural or noun + 's'}"
