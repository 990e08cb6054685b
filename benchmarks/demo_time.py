"""How long the README's main command takes: `hardpos demo` end to end, in a fresh process.

    python benchmarks/demo_time.py

Runs `hardpos demo --output-dir <temporary folder>` (the default configuration, no downloads) and
records in `benchmarks/results.json` the process's wall time (imports, the experiment, the report and
the chart included) and the experiment's own clock from the demo's `run_info.json`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record  # benchmarks/results.py: one results file for every benchmark


def main() -> int:
    output = Path(tempfile.mkdtemp(prefix="hardpos-demo-")) / "demo"
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "hf_hardpos.cli", "demo", "--output-dir", str(output)])
    wall = time.perf_counter() - began
    if done.returncode != 0:
        print(f"hardpos demo failed with exit status {done.returncode}")
        return done.returncode
    timings = json.loads((output / "run_info.json").read_text())["timings_seconds"]
    print(f"hardpos demo: {wall:.0f} s wall for the whole process; the experiment's own clock {timings['total']:.0f} s")
    record("demo_time", {"wall_s": f"{wall:.0f}", "experiment_s": f"{timings['total']:.0f}"})
    shutil.rmtree(output.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
