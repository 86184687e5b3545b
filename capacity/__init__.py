"""gpucast.capacity — pure capacity-planning library (no web, database or settings code)."""

__all__: list[str] = []
