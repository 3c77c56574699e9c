"""A real headless Chromium (Debian's ``chromium`` and ``chromedriver``) driven by Selenium,
for tests and benchmarks of the HTML evalreg writes.

Selenium talks to the distribution's chromedriver, which matches its chromium exactly;
nothing is downloaded (no Selenium Manager, no bundled browser). The browser is cut off
from the network: a file it opens must render with nothing but itself.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("EVALREG_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(
    os.environ.get("EVALREG_CHROMEDRIVER")
    # GitHub's runner images keep their Chrome's driver in this directory.
    or (
        Path(os.environ["CHROMEWEBDRIVER"]) / "chromedriver"
        if "CHROMEWEBDRIVER" in os.environ
        else "/usr/bin/chromedriver"
    )
)
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    # No route anywhere: a page that tried to fetch would fail (and log it).
    "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
)


def available() -> bool:
    return CHROMIUM.is_file() and CHROMEDRIVER.is_file()


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A Selenium WebDriver for a fresh headless Chromium profile, closed on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="evalreg-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
