"""Forecast runs on the service side: the pure work that makes one (``work``: history arrays
in, a fitted, selected and forecast series x metric out, picklable to a process pool or a Dask
cluster) and the store of runs and their points (``store``: one run written per transaction,
readers see the latest complete run). The jobs (``app.jobs``), the plans, the views and the API
build on both. Nothing is imported here, so a worker that only runs ``work`` loads no database
code."""
