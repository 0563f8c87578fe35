"""Fixtures for examples/app: the server as a real subprocess, an HTTP client, a headless Chromium.

    def test_x(app):                      # app(db=None, token=None) -> a running AppProcess
        server = app()
        status, body = server.call("POST", "/api/sessions")

    def test_y(app, browser):             # browser: a Selenium driver on the system's Chromium
        ...

The browser is Debian's `chromium` + `chromium-driver` (scripts/test installs them when missing).
Under CI=true a missing browser or selenium fails these tests; elsewhere they are skipped.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from app_helpers import AppProcess

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Callable[..., AppProcess]]:
    started: list[AppProcess] = []

    def start(
        db: Path | None = None,
        token: str | None = None,
        heartbeat: float | None = None,
        env: dict[str, str] | None = None,
        args: tuple[str, ...] = (),
    ) -> AppProcess:
        process = AppProcess(db or tmp_path / "chats.db", token, heartbeat, tmp_path, env or {}, args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the browser tests cannot run under CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def _chromium() -> Iterator[Any]:
    """One headless Chromium for the whole test session (each test opens its own server's origin)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("selenium is not installed (pip install -e '.[test]')")
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        _unavailable(f"{CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="agentcore-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # The machine has no internet: no sandbox (root), and nothing that phones home at start.
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1100,720",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def browser(_chromium: Any) -> Iterator[Any]:
    """The shared driver, reduced to one blank tab after each test."""
    yield _chromium
    handles = _chromium.window_handles
    for handle in handles[1:]:
        _chromium.switch_to.window(handle)
        _chromium.close()
    _chromium.switch_to.window(handles[0])
    _chromium.get("about:blank")
