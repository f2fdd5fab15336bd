"""`recon4d view` in a real headless Chromium: the page loads, the time slider moves the frame, no console errors.

Needs the system's Chromium and chromedriver (Debian: `apt-get install chromium
chromium-driver`; `.ci/run` installs them) and the `selenium` test extra; skips with the
reason when they are missing.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
selenium = pytest.importorskip("selenium", reason="selenium (test extra) is not installed")
pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)),
                                reason="headless Chromium not installed (apt-get install chromium chromium-driver)")

# viser's own splat renderer logs this for every splat set (a page holding nothing but random splats
# from viser's API logs it too): its quad geometry has a 2-component "position" attribute
# (viser/client/src/Splatting/GaussianSplatsHelpers.ts), whose z three.js's bounding-sphere check reads as NaN.
KNOWN_VISER_NOISE = ("computeBoundingSphere(): Computed radius is NaN",)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(predicate, timeout: float, what: str):
    end = time.time() + timeout
    while time.time() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


@pytest.fixture
def viewer(fitted_left_scene, tmp_path):
    """The viewer as a user starts it (a subprocess), stopped with Ctrl-C (SIGINT) at the end."""
    _, scene_dir = fitted_left_scene
    port = _free_port()
    log = open(tmp_path / "viewer.log", "w+")
    proc = subprocess.Popen([sys.executable, "-m", "recon4d.cli", "view", "--scene", str(scene_dir),
                             "--port", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            cwd=Path(__file__).resolve().parents[1])
    read = lambda: Path(log.name).read_text()  # noqa: E731
    try:
        _wait_for(lambda: "viewer: http://127.0.0.1" in read() or proc.poll() is not None, 120, "the viewer")
        assert proc.poll() is None, read()
        yield f"http://127.0.0.1:{port}", proc, read
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()


def _browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--use-angle=swiftshader", "--enable-unsafe-swiftshader"):  # software WebGL, no GPU needed
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _frame_line(driver) -> str:
    from selenium.webdriver.common.by import By

    lines = [ln for ln in driver.find_element(By.TAG_NAME, "body").text.splitlines() if ln.startswith("frame ")]
    return lines[0] if lines else ""


def test_time_slider_changes_the_frame(viewer):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, proc, read_log = viewer
    driver = _browser()
    try:
        driver.get(url)
        assert _wait_for(lambda: "of 24" in _frame_line(driver) and _frame_line(driver), 60, "the panel"
                         ).startswith("frame 12 of 24")
        thumb = driver.find_element(By.CSS_SELECTOR, "[role=slider]")
        driver.execute_script("arguments[0].focus()", thumb)
        ActionChains(driver).send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT).perform()
        _wait_for(lambda: _frame_line(driver).startswith("frame 15 of 24"), 30, "frame 15 in the panel")
        assert thumb.get_attribute("aria-valuenow") == "15"

        # The colour switch re-colours the splats and is reported too.
        options = driver.find_elements(By.XPATH, "//input[@value='rgb' and not(@type='hidden')]")
        options[0].click()
        driver.find_element(By.XPATH, "//*[@role='option' and normalize-space()='feature pca']").click()
        _wait_for(lambda: "feature pca" in _frame_line(driver), 30, "the feature-PCA mode")
        assert _frame_line(driver).startswith("frame 15 of 24")

        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
                  and not any(noise in e["message"] for noise in KNOWN_VISER_NOISE)]
        assert errors == []
    finally:
        driver.quit()
    # Ctrl-C shuts the server down cleanly.
    proc.send_signal(signal.SIGINT)
    assert proc.wait(20) == 0
    assert "viewer: stopped" in read_log() and "Traceback" not in read_log()
