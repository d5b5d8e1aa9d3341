"""The server of a model trained into several languages: /info lists them, /translate takes
`tgt_lang` and answers as `tfm translate --tgt-lang` does, and a language the model was not
trained for is a 422 naming those it was."""

import pytest
from http_client import call, served

from tfm.commands.engines import open_translator
from tfm.prediction.settings import DecodeRequest
from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits

SENTENCES = ["cat dog sun", "big red tree"]
LIMITS = ServeLimits(timeout_s=30)


@pytest.fixture(scope="module")
def server(related_run):
    translator = open_translator(DecodeRequest(run=related_run, device="cpu", threads=1))
    with served(create_app(translator, LIMITS), LIMITS) as base:
        yield base


def test_translate_takes_the_target_language(server, related_run):
    info = call(server, "GET", "/info").json()
    assert (info["tgt_lang"], info["tgt_langs"]) == ("aa", ["aa", "bb"])
    for lang in ("aa", "bb"):
        expected = open_translator(DecodeRequest(run=related_run, device="cpu", threads=1,
                                                 tgt_lang=lang)).translate(SENTENCES)  # fmt: skip
        answer = call(server, "POST", "/translate", {"sentences": SENTENCES, "tgt_lang": lang})
        assert answer.status == 200 and answer.json()["translations"] == expected
    default = call(server, "POST", "/translate", {"sentences": SENTENCES}).json()
    assert default["translations"] != expected  # bb's, the last asked for


def test_a_language_it_was_not_trained_for_is_named(server):
    answer = call(server, "POST", "/translate", {"sentences": SENTENCES, "tgt_lang": "de"})
    assert answer.status == 422
    assert (
        "tgt_lang de: the model was trained to translate into aa, bb, not de"
        in (answer.json()["error"])
    )
