"""gpucast.forecasting — pure forecasting library (no web, database or settings code)."""

__all__: list[str] = []
