"""gpucast service: settings, database, ingestion, REST API, Grafana datasource, jobs, CLI."""

__version__ = "0.1.0"
