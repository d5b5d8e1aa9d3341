"""The page at / in a real browser (headless Chromium, driven by Selenium): it translates what
is typed, and its heatmap shows the weights of /attention for the layer, head and kind chosen,
in the colours of `tfm attention`, with byte-fallback tokens as characters and a note when
they are not of the translation shown; an error clears what an earlier sentence showed and
names no option of the server, and an emptied box clears it; its Content-Security-Policy
refuses nothing the page does; with an export the attention panel says why it is empty; a model
trained into several languages gets a menu of them, and translates into the one chosen.
Skipped where Chromium or its driver is not installed.

The page is shown on a tiny 2+2-layer run trained here in seconds (or the run in TFM_SERVE_RUN);
with TFM_SERVE_SCREENSHOT=FILE the test saves its screenshot there (docs/serve.png is one)."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
from pathlib import Path

import pytest
from builders import tiny_config
from http_client import call, served

from tfm.commands.engines import open_translator
from tfm.prediction.confidence import ConfidenceMap
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.translator import framed_nonblank
from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits
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


@pytest.fixture(scope="module")
def with_bytes(tmp_path_factory):
    """A tiny translator whose tokenizer spells the characters it never saw in bytes."""
    run = tmp_path_factory.mktemp("bytes") / "run"
    tokens = {"byte_fallback": True, "vocab_size": 400}
    train(tiny_config(run, max_steps=10, tokenizer=tokens, decoding={"max_len_b": 4}),
          progress_bar=False)  # fmt: skip
    return open_translator(DecodeRequest(run=run, device="cpu", threads=1))


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    """Headless Chromium with a fresh profile, nothing fetched from the network: one for the
    module's tests (starting it is most of a test's time)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")  # Selenium Manager downloads nothing
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        profile = tmp_path_factory.mktemp("profile")
        for argument in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--no-first-run", "--window-size=1400,900",
                         f"--user-data-dir={profile}"):  # fmt: skip
            options.add_argument(argument)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read below
        driver = webdriver.Chrome(options=options, service=Service(executable_path=DRIVER))
    driver.set_page_load_timeout(WAIT_S)
    yield driver
    driver.quit()


@pytest.fixture
def browser(chromium):
    """The module's Chromium on a blank page, with no console lines of an earlier test."""
    chromium.get("about:blank")
    chromium.get_log("browser")
    return chromium


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
        asked = layered.settings.asking(layered.config.decoding, {"beam_size": 1})  # the page's
        [[(_, score)]] = layered.nbest([SENTENCE], 1, settings=asked)  # the run has no map
        unmapped = f"Score {score:.4f}; no confidence: the model has no confidence map."
        assert text_of(browser, "confidence") == unmapped
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
        # Nothing refused by the page's Content-Security-Policy, nor any other error.
        errors = [e["message"] for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert [e for e in errors if "/favicon.ico" not in e] == []  # tfm serves no icon
        shot = Path(os.environ.get("TFM_SERVE_SCREENSHOT") or tmp_path / "serve.png")
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def text_of(driver, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.ID, element_id).get_attribute("textContent")


def enter(driver, sentence: str) -> None:
    """`sentence` typed into the emptied box, then Enter."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    box = driver.find_element(By.ID, "source")
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(Keys.BACKSPACE, sentence, Keys.ENTER)


def test_the_page_shows_the_confidence_and_flags_a_low_one(layered, browser, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    page = layered.settings.asking(layered.config.decoding, {"beam_size": 1})  # what it asks
    _, sources = framed_nonblank(layered.tokenizer, [SENTENCE])
    [[(_, _, ids)]] = layered.ranked_found([SENTENCE], sources, page, [1])
    [figure] = layered.log_probs(sources, [ids])
    # A map that expects chrF 40 of this translation, under its low mark of 50.
    steep = ConfidenceMap(
        knots=((figure - 1, 0.0), (figure, 40.0), (figure + 1, 80.0)), low=50.0, strategy="beam"
    )
    monkeypatch.setattr(layered, "confidence_map", steep)
    wait = WebDriverWait(browser, WAIT_S)
    with served(create_app(layered)) as base:
        browser.get(base + "/")
        wait.until(lambda d: "→" in text_of(d, "model-info"))
        enter(browser, SENTENCE)
        low = "Confidence 40: the sentence chrF expected of this translation; low, check it."
        wait.until(lambda d: text_of(d, "confidence") == low)
        assert "low" in browser.find_element(By.ID, "confidence").get_attribute("class")
        Select(browser.find_element(By.ID, "n-best")).select_by_visible_text("2")
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#n-best-list .score")) == 2)
        [first, _] = browser.find_elements(By.CSS_SELECTOR, "#n-best-list .score")
        assert first.get_attribute("textContent").endswith(" · confidence 40")
        lower = dataclasses.replace(steep, low=30.0)
        monkeypatch.setattr(layered, "confidence_map", lower)  # the same figure, now not low
        browser.get(base + "/")
        wait.until(lambda d: "→" in text_of(d, "model-info"))
        enter(browser, SENTENCE)
        fine = "Confidence 40: the sentence chrF expected of this translation."
        wait.until(lambda d: text_of(d, "confidence") == fine)
        assert "low" not in browser.find_element(By.ID, "confidence").get_attribute("class")


def test_the_page_names_bytes_notes_the_beam_and_clears_old_results_and_errors(with_bytes, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    limits = ServeLimits(max_chars=60)
    sentence = "the dog sees the cat €"  # € was never seen: three byte tokens
    [greedy] = with_bytes.translate([sentence])
    wider = with_bytes.settings.asking(with_bytes.config.decoding, {"beam_size": 4})
    [beam] = with_bytes.translate([sentence], settings=wider)
    with served(create_app(with_bytes, limits), limits) as base:
        browser.get(base + "/")
        wait.until(lambda d: "→" in text_of(d, "model-info"))
        enter(browser, sentence)
        wait.until(lambda d: d.find_element(By.ID, "heatmap").get_attribute("data-view"))
        assert text_of(browser, "translation") == greedy
        heads = browser.find_elements(By.CSS_SELECTOR, "#heatmap thead th")
        tokens = [th.get_attribute("textContent") for th in heads]
        assert tokens[-4:] == ["€ 1/3", "€ 2/3", "€ 3/3", "</s>"]
        assert not [token for token in tokens if "<0x" in token]
        same = "These are the weights of the translation shown above (greedy search finds it too)."
        assert text_of(browser, "attention-note") == same

        Select(browser.find_element(By.ID, "beam-size")).select_by_visible_text("4")
        wait.until(lambda d: text_of(d, "translation") == beam)
        differs = "These are the weights of greedy search's translation; beam search's, shown " \
            "above, differs."  # fmt: skip
        wait.until(lambda d: text_of(d, "attention-note") == (same if beam == greedy else differs))

        enter(browser, "the dog sees the cat and the bird sees the dog and the cat sleeps")
        too_long = "The sentence has 65 characters; at most 60 a sentence."  # no server option
        wait.until(lambda d: text_of(d, "status") == too_long)
        assert text_of(browser, "translation") == "" and text_of(browser, "attention-pair") == ""
        assert browser.find_elements(By.CSS_SELECTOR, "#heatmap td, #n-best-list li") == []

        browser.find_element(By.ID, "source").send_keys(Keys.CONTROL, "a", Keys.BACKSPACE)
        wait.until(lambda d: text_of(d, "status") == "")


def test_with_an_export_the_attention_panel_says_why_it_is_empty(layered, browser, tmp_path):
    pytest.importorskip("ctranslate2")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    from tfm.deploy import export_run

    export_run(layered.run, tmp_path / "export")
    exported = open_translator(DecodeRequest(run=tmp_path / "export", threads=1))
    wait = WebDriverWait(browser, WAIT_S)
    with served(create_app(exported)) as base:
        browser.get(base + "/")
        wait.until(lambda d: "ctranslate2" in text_of(d, "model-info"))
        absent = browser.find_element(By.ID, "attention-absent")
        assert absent.is_displayed() and absent.text == (
            "No attention weights here: they need a torch run, and this server decodes a "
            "ctranslate2 export. Serve the run it was exported from to see them."
        )
        assert not browser.find_element(By.ID, "attention-view").is_displayed()
        enter(browser, SENTENCE)
        [translation] = exported.translate([SENTENCE])
        wait.until(lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-translated"))
        assert text_of(browser, "translation") == translation and text_of(browser, "status") == ""


def test_a_model_of_several_targets_gets_a_menu_and_translates_into_the_one_chosen(
    related_run, layered, browser
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select
    from selenium.webdriver.support.wait import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    sentence = "cat dog sun"
    several = open_translator(DecodeRequest(run=related_run, device="cpu", threads=1))
    into_bb = several.settings.into(several.config.data, "bb")
    expected = several.translate([sentence], settings=into_bb)[0]
    with served(create_app(several)) as base:
        browser.get(base + "/")
        wait.until(lambda d: "aa, bb" in d.find_element(By.ID, "model-info").text)
        assert browser.find_element(By.ID, "tgt-label").is_displayed()
        Select(browser.find_element(By.ID, "tgt-lang")).select_by_visible_text("bb")
        enter(browser, sentence)
        wait.until(lambda d: text_of(d, "translation") == expected,
                   message=f"{expected!r} never shown")  # fmt: skip
        assert expected.split()[0].endswith("z")
        wait.until(lambda d: d.find_element(By.ID, "heatmap").get_attribute("data-view"))
        assert text_of(browser, "attention-pair").endswith(f"“{expected}”")
    with served(create_app(layered)) as base:  # one target: no menu
        browser.get(base + "/")
        wait.until(lambda d: "→" in d.find_element(By.ID, "model-info").text)
        assert not browser.find_element(By.ID, "tgt-label").is_displayed()
