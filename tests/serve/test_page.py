"""The page at / in a real browser (headless Chromium, driven by Selenium): it translates what
is typed, and its heatmap shows the weights of /attention for the layer, head and kind chosen,
in the colours of `tfm attention`. Skipped where Chromium or its driver is not installed.

The page is shown on a tiny 2+2-layer run trained here in seconds (or the run in TFM_SERVE_RUN);
with TFM_SERVE_SCREENSHOT=FILE the test saves its screenshot there (docs/serve.png is one)."""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import pytest
from builders import tiny_config
from http_client import call, served

from tfm.commands.engines import open_translator
from tfm.prediction.settings import DecodeRequest
from tfm.serve.app import create_app
from tfm.training import train

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
selenium = pytest.importorskip("selenium", reason="needs selenium (tfm's dev extra)")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or DRIVER is None,
    reason="needs chromium and chromedriver (Debian: apt-get install chromium chromium-driver)",
)
SENTENCE = "the small dog sees the big cat"
WAIT_S = 20


@pytest.fixture(scope="module")
def layered(tmp_path_factory):
    """A translator with two layers of four heads in each stack, to switch between."""
    run = os.environ.get("TFM_SERVE_RUN")
    if run is None:
        run = tmp_path_factory.mktemp("page") / "run"
        shape = {"n_encoder_layers": 2, "n_decoder_layers": 2, "n_heads": 4}
        train(tiny_config(run, max_steps=30, model=shape, decoding={"max_len_b": 4}),
              progress_bar=False)  # fmt: skip
    return open_translator(DecodeRequest(run=run, device="cpu", threads=1))


@pytest.fixture
def browser(tmp_path, monkeypatch):
    """Headless Chromium with a fresh profile, nothing fetched from the network."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    monkeypatch.setenv("SE_OFFLINE", "true")  # Selenium Manager downloads nothing
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--no-first-run", "--window-size=1400,900",
                     f"--user-data-dir={tmp_path / 'profile'}"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


def heatmap(driver) -> list[list[float]]:
    """The weights the heatmap's cells show, row by row."""
    return driver.execute_script(
        "return [...document.querySelectorAll('#heatmap tbody tr')].map(row => "
        "[...row.querySelectorAll('td.cell')].map(cell => Number(cell.dataset.weight)));"
    )


def expected_colour(weight: float) -> str:
    """`tfm attention`'s colour of a weight, as the browser reports a background colour."""
    import matplotlib

    red, green, blue, _ = matplotlib.colormaps["viridis"].resampled(256)(math.sqrt(weight))
    return f"rgba({round(red * 255)}, {round(green * 255)}, {round(blue * 255)}, 1)"


def test_the_page_translates_and_shows_the_attention_of_the_chosen_head(layered, browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    with served(create_app(layered)) as base:
        attention = call(base, "POST", "/attention", {"sentence": SENTENCE}).json()
        [translation] = layered.translate([SENTENCE])
        browser.get(base + "/")
        wait.until(lambda d: "→" in d.find_element(By.ID, "model-info").text)
        browser.find_element(By.ID, "source").send_keys(SENTENCE, Keys.ENTER)
        shown = lambda d: d.find_element(By.ID, "translation").get_attribute("textContent")  # noqa: E731
        wait.until(lambda d: shown(d) == translation, message=f"{translation!r} never shown")
        wait.until(lambda d: d.find_element(By.ID, "heatmap").get_attribute("data-view"))
        assert heatmap(browser) == attention["cross"][0][0]
        pair = browser.find_element(By.ID, "attention-pair").get_attribute("textContent")
        assert pair == f"“{SENTENCE}” → “{attention['translation']}”"
        tokens = [th.text for th in browser.find_elements(By.CSS_SELECTOR, "#heatmap thead th")]
        assert tokens[1:] == attention["source_tokens"]

        Select(browser.find_element(By.ID, "layer")).select_by_visible_text("2")
        Select(browser.find_element(By.ID, "head")).select_by_visible_text("3")
        assert heatmap(browser) == attention["cross"][1][2]
        cell = browser.find_element(By.CSS_SELECTOR, "#heatmap tbody tr td.cell")
        weight = attention["cross"][1][2][0][0]
        assert cell.value_of_css_property("background-color") == expected_colour(weight)

        Select(browser.find_element(By.ID, "kind")).select_by_value("decoder")
        assert heatmap(browser) == attention["decoder"][1][2]
        masked = browser.find_elements(By.CSS_SELECTOR, "#heatmap tbody tr:first-child td.cell")
        assert masked[-1].value_of_css_property("background-color") == "rgba(221, 221, 221, 1)"
        Select(browser.find_element(By.ID, "kind")).select_by_value("cross")
        Select(browser.find_element(By.ID, "n-best")).select_by_visible_text("3")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#n-best-list li")) == 3)
        assert browser.find_element(By.ID, "status").text == ""
        shot = Path(os.environ.get("TFM_SERVE_SCREENSHOT") or tmp_path / "serve.png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
