"""Defaults and limits that the CLI, the REST API and the README all state: one place each, so
help text, validation and documentation cannot drift apart (tests/app/test_options_documented.py
checks the README and every ``--help`` against them). Imports nothing heavy: the CLI reads it
while building its parser."""

from __future__ import annotations

# The in-cluster Service of deploy/kubernetes: the address a KEDA object polls by default.
DEFAULT_PUBLIC_URL = "http://gpucast:8000"
