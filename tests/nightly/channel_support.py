"""Helpers for the wheel-channel tests: real wheels, fresh venvs, pip, a real HTTP server and headless Chromium.

pip runs isolated from this machine's pip configuration (PIP_CONFIG_FILE=/dev/null, no PIP_*
variables), so it can find the package only in the index under test. The browser is Debian's
chromium driven by Selenium through Debian's chromedriver (apt-get install chromium chromium-driver).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urldefrag

import pytest
from nightly_support import free_port, wait_for_port

CHROMIUM = "/usr/bin/chromium"  # Debian's places, when PATH does not name them (tests/conftest.py checks PATH)
CHROMEDRIVER = "/usr/bin/chromedriver"
PIP_TIMEOUT = 120


def make_project(folder: Path, name: str = "Tiny_Winbuild.Probe", version: str = "1.0+nightly.1") -> Path:
    """A minimal setuptools project whose name needs PEP 503 normalisation and whose version has a `+`."""
    package = folder / "tiny_winbuild_probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(f'VALUE = "installed from the nightly index"\nVERSION = "{version}"\n')
    (folder / "pyproject.toml").write_text(
        textwrap.dedent(
            f"""\
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "{name}"
            version = "{version}"
            requires-python = ">=3.8"

            [tool.setuptools]
            packages = ["tiny_winbuild_probe"]
            """
        )
    )
    return folder


def pip_env() -> dict[str, str]:
    """This environment without any pip configuration: no config files, no PIP_* variables."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PYTHONUTF8": "1"}


def build_wheel(project: Path, destination: Path) -> Path:
    """`pip wheel` of the project (setuptools from this environment, no network); the wheel's path."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(destination),
            str(project),
        ],
        capture_output=True,
        text=True,
        env=pip_env(),
        timeout=PIP_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    [wheel] = destination.glob("*.whl")
    return wheel


def fresh_venv(folder: Path) -> Path:
    """`python -m venv` without pip of its own (this pip installs into it with --python); its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=60)
    return folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def pip_install(python: Path, index_url: str, *requirements: str) -> subprocess.CompletedProcess[str]:
    """pip installs `requirements` into the venv of `python` from `index_url` alone, downloading again every time."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-cache-dir",
            "--index-url",
            index_url,
            *requirements,
        ],
        capture_output=True,
        text=True,
        env=pip_env(),
        timeout=PIP_TIMEOUT,
    )


def run_in(python: Path, code: str) -> str:
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, cwd=python.parent)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@dataclass(frozen=True)
class Served:
    """A running `python -m http.server`: its base URL (ending in /) and its access log."""

    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


@contextmanager
def http_server(folder: Path) -> Iterator[Served]:
    """`python -m http.server` serving `folder` on 127.0.0.1, its requests logged beside the folder."""
    port = free_port()
    log_path = folder.parent / f"http-server-{port}.log"
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(folder)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_for_port(port)
            yield Served(f"http://127.0.0.1:{port}/", log_path)
        finally:
            process.terminate()
            process.wait(timeout=10)


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium through Selenium and Debian's chromedriver, logging the console."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.fail("selenium is not installed (pip install selenium; .ci/run installs it).", pytrace=False)
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or CHROMIUM
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,1600",
    ):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver") or CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(30)
        yield driver
    finally:
        driver.quit()


def console_problems(driver: Any) -> list[dict[str, Any]]:
    """The console's errors and warnings since the last call (CSP violations, failed loads, script errors)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") in ("SEVERE", "WARNING")]


def check_dashboard(driver: Any, url: str, expected: list[str], failing: str, diagnosis: str) -> list[str]:
    """Load the dashboard; every entry visible, the failing one outlined with its diagnosis; its links' URLs."""
    from selenium.webdriver.common.by import By

    driver.get_log("browser")  # start from an empty console
    driver.get(url)
    assert driver.title.startswith("PyTorch nightly: 1 of ")
    sections = driver.find_elements(By.CSS_SELECTOR, "section.entry")
    assert [section.get_attribute("data-entry") for section in sections] == expected
    assert all(section.is_displayed() for section in sections)
    [marked] = driver.find_elements(By.CSS_SELECTOR, "section.entry.failing")
    assert marked.get_attribute("data-entry") == failing
    assert marked.value_of_css_property("border-top-color") == "rgba(198, 40, 40, 1)"
    assert diagnosis in marked.text  # the newest failure's details are open: visible text
    banner = driver.find_element(By.ID, "failing")
    assert banner.is_displayed() and failing in banner.text and diagnosis in banner.text
    svg_bars = marked.find_elements(By.CSS_SELECTOR, "svg.trend g.night.bad")
    assert svg_bars and all(bar.is_displayed() for bar in svg_bars)
    banner.find_element(By.TAG_NAME, "a").click()
    assert driver.current_url.endswith("#" + marked.get_attribute("id"))
    hrefs = [str(link.get_attribute("href")) for link in driver.find_elements(By.TAG_NAME, "a")]
    assert console_problems(driver) == []
    return hrefs


def assert_links_resolve(driver: Any, hrefs: list[str]) -> None:
    """Each link the page showed names something: a file (file://), a 200 (http://), or an element (#fragment)."""
    from selenium.webdriver.common.by import By

    assert hrefs
    for href in hrefs:
        url, fragment = urldefrag(href)
        if url.startswith("file://"):
            path = Path(unquote(url.removeprefix("file://")))
            assert path.is_file() or (path / "index.html").is_file(), href
        else:
            assert url.startswith("http://127.0.0.1:") and http_status(url) == 200, href
        if fragment:
            assert driver.find_elements(By.ID, fragment), href
