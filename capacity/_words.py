"""Counted nouns in the library's messages: ``1 GPU``, ``2 GPUs``."""

from __future__ import annotations


def count(n: float, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural unless ``n`` is 1."""
    return f"{n:g} {noun if n == 1 else plural or noun + 's'}"
