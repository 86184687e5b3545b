"""pip-audit of the installed environment, for .ci/run: ``python .ci/audit.py REPORT.json``.

Writes pip-audit's JSON report to REPORT.json and a summary to stdout. The policy:

- exit 1 when the audit ran and found a known vulnerability in gpucast's runtime dependencies
  (the closure of ``[project.dependencies]``, what a deployment installs);
- vulnerabilities only in test and development tools are listed but do not fail CI;
- when the vulnerability service cannot be reached (no network, or every package skipped because
  the service answered for none of them), it says so and exits 0, so an offline CI still runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


def runtime_closure(root: str = "gpucast") -> set[str]:
    """Canonical names of every distribution ``root`` needs at run time (its own extras not
    included; extras its requirements ask for, like ``psycopg[binary]``, are)."""
    seen: set[tuple[str, str]] = set()
    stack: list[tuple[str, str]] = [(root, "")]
    while stack:
        name, extra = stack.pop()
        key = (canonicalize_name(name), extra)
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": extra}):
                stack.append((requirement.name, ""))
                stack.extend((requirement.name, e) for e in requirement.extras)
    return {name for name, _ in seen} - {canonicalize_name(root)}


def main(report: Path) -> int:
    report.parent.mkdir(parents=True, exist_ok=True)
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pip_audit", "--format", "json", "--skip-editable"]
    command += ["--progress-spinner", "off", "--timeout", "15", "--output", str(report)]
    done = subprocess.run(command, capture_output=True, text=True)
    if not report.exists():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"pip-audit: vulnerability service unreachable, not audited ({last[:300]})")
        return 0
    dependencies = json.loads(report.read_text())["dependencies"]
    audited = [d for d in dependencies if "skip_reason" not in d]
    if not audited:
        print(
            f"pip-audit: none of {len(dependencies)} packages could be audited (the service "
            "answered for none of them; no network?) — not audited"
        )
        return 0
    runtime = runtime_closure()
    vulnerable = [d for d in audited if d.get("vulns")]
    for dep in vulnerable:
        scope = "runtime" if canonicalize_name(dep["name"]) in runtime else "tooling"
        ids = ", ".join(v["id"] for v in dep["vulns"])
        print(f"pip-audit: {scope} {dep['name']} {dep['version']}: {ids}")
    failing = [d for d in vulnerable if canonicalize_name(d["name"]) in runtime]
    print(
        f"pip-audit: {len(audited)} packages audited, {len(vulnerable)} with known "
        f"vulnerabilities, {len(failing)} of them runtime dependencies of gpucast"
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "build/pip-audit.json")))
