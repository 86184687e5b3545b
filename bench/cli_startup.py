"""Wall time of CLI commands that return before touching data: ``gpucast --help`` and the
``--help`` of each heavy command (what an operator waits for before anything happens).

    OMP_NUM_THREADS=1 python bench/cli_startup.py --repeat 7 [--source DIR]

``--source DIR`` runs the gpucast tree in DIR instead (e.g. an exported older commit), so two
versions are measured side by side on the same machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

COMMANDS = (
    ["--help"],
    ["plan", "--help"],
    ["forecast", "--help"],
    ["pool", "--help"],
    ["ingest", "--help"],
)


def time_command(argv: list[str], *, source: str | None) -> float:
    env = dict(os.environ)
    tree = source or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = tree
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "app.cli", *argv],
        env=env,
        cwd=tree,
        stdout=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--source", help="directory of another gpucast tree to measure")
    args = parser.parse_args()
    print(f"| command | median s | min s | max s |  ({args.source or 'this tree'})")
    print("|---|---|---|---|")
    for argv in COMMANDS:
        runs = [time_command(argv, source=args.source) for _ in range(args.repeat)]
        name = "gpucast " + " ".join(argv)
        print(f"| `{name}` | {statistics.median(runs):.2f} | {min(runs):.2f} | {max(runs):.2f} |")


if __name__ == "__main__":
    main()
