"""Regenerate the documentation's screenshot of the served page (docs/serve-page.png): serve a
tagger, type a text into its page in Chromium, and take the picture once its entities show.

    python examples/docs_screenshots.py runs/conll03/model [docs/serve-page.png]

Needs the serve and browser extras and Debian's chromium (BISTACK_CHROMIUM names another)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TEXT = (
    "Germany's Angela Merkel met Emmanuel Macron in Paris on Monday to discuss the European "
    "Union's budget, Reuters reported, before flying to the World Economic Forum in Davos."
)


def main(model: str, output: Path = Path("docs/serve-page.png")) -> None:
    from playwright.sync_api import sync_playwright

    chromium = os.environ.get("BISTACK_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("no chromium: apt install chromium, or name one in BISTACK_CHROMIUM")
    server = subprocess.Popen(
        [sys.executable, "-m", "bistack", "serve", model, "--port", "0", "--workers", "1",
         "--no-access-log"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = server.stdout.readline()
        address = line.split(" on ")[1].split()[0].rstrip(",")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 980, "height": 560})
            page.goto(address)
            page.wait_for_selector("#run:not([disabled])")
            page.wait_for_function("document.querySelector('#about').textContent.includes('·')")
            page.fill("#input", TEXT)
            page.click("#run")
            page.wait_for_selector("mark.entity")
            page.screenshot(path=str(output), full_page=True)
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {output}")


if __name__ == "__main__":
    main(sys.argv[1], *(Path(path) for path in sys.argv[2:3]))
