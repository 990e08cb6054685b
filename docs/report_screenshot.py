"""Take the screenshot of a `hardpos report` page that docs/reports.md shows with headless Chromium.

    hardpos demo --output-dir runs/demo          # writes runs/demo/report.html
    python docs/report_screenshot.py runs/demo/report.html --output docs/report-screenshot.png

Chromium (Debian: `apt-get install -y chromium`) renders the page offline: the report is one file with
its CSS and charts embedded, so what the screenshot shows is exactly what a reader's browser shows.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def screenshot(page: Path, output: Path, width: int, height: int) -> Path:
    browser = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if browser is None:
        raise SystemExit(f"no headless browser found (tried {', '.join(BROWSERS)}); Debian: apt-get install -y chromium")
    output.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--window-size={width},{height}",
         f"--screenshot={output.resolve()}", page.resolve().as_uri()],
        check=True, capture_output=True, timeout=120,
    )
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path, help="a report.html written by hardpos report (or hardpos demo)")
    parser.add_argument("--output", type=Path, default=Path("docs/report-screenshot.png"))
    parser.add_argument("--width", type=int, default=1100)
    parser.add_argument("--height", type=int, default=1500, help="the top of the page this tall is captured")
    args = parser.parse_args(argv)
    print(f"wrote {screenshot(args.page, args.output, args.width, args.height)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
