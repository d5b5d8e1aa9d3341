"""BLEU with the tokenizer sacreBLEU prescribes for the target language: `ja-mecab` for
Japanese, `zh` for Chinese, `ko-mecab` for Korean, `13a` otherwise; named in the signature;
where the tokenizer's package is missing, or the references are in a script without spaces
that sacreBLEU prescribes none for, characters (or `13a` for spaced text), one warning, and
chrF as the headline."""

import importlib.util
import logging

import pytest
import sacrebleu

from tfm.prediction import scoring as evaluation
from tfm.prediction.scoring import bleu_is_prescribed, bleu_tokenizer_for, score_translations

JA_REFS = ["彼は新しい車を買った。", "私は緑茶がとても好きです。", "駅はどこですか。"]
JA_HYPS = ["彼は新車を買った。", "私は緑茶が大好きです。", "駅はどこですか。"]
ZH_REFS = ["我喜欢喝绿茶。", "他昨天买了一辆新车。"]
ZH_HYPS = ["我很喜欢喝绿茶。", "他买了一辆新车。"]
TH_REFS = ["ฉันชอบกินข้าวผัดกับไก่ทอด", "เขาไปโรงเรียนทุกวัน", "วันนี้อากาศดีมาก"]
TH_HYPS = ["ฉันชอบกินข้าวผัดกับไก่", "เขาไปโรงเรียนทุกวัน", "วันนี้อากาศดี"]


@pytest.mark.parametrize(
    ("lang", "name"),
    [("ja", "ja-mecab"), ("ja-JP", "ja-mecab"), ("jpn", "ja-mecab"), ("zh", "zh"),
     ("zh_Hant", "zh"), ("ZHO", "zh"), ("cmn", "zh"), ("ko", "ko-mecab"), ("kor", "ko-mecab"),
     ("de", "13a"), ("en", "13a"), ("jam", "13a"), ("", "13a"), (None, "13a")],
)  # fmt: skip
def test_each_language_gets_sacrebleus_tokenizer(lang, name):
    assert bleu_tokenizer_for(lang)[0] == name


def hide(monkeypatch, *modules: str) -> None:
    """Make `modules` look uninstalled to tfm, and forget which warnings were given."""
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in modules else find_spec(name)
    )
    monkeypatch.setattr(evaluation, "_warned", set())


def test_availability_is_whether_the_tokenizers_packages_are_installed(monkeypatch):
    assert bleu_tokenizer_for("zh") == ("zh", True) and bleu_tokenizer_for("fr") == ("13a", True)
    hide(monkeypatch, "ipadic", "mecab_ko")
    assert bleu_tokenizer_for("ja") == ("ja-mecab", False)
    assert bleu_tokenizer_for("ko") == ("ko-mecab", False)


def test_japanese_bleu_is_scored_on_mecab_words():
    pytest.importorskip("MeCab")
    pytest.importorskip("ipadic")
    scores = score_translations(JA_HYPS, JA_REFS, tgt_lang="ja")
    expected = sacrebleu.corpus_bleu(JA_HYPS, [JA_REFS], tokenize="ja-mecab")
    assert scores["bleu"] == round(expected.score, 2) and scores["headline"] == "bleu"
    assert "|tok:ja-mecab-" in scores["bleu_signature"]
    # Without a language, the references' script says: characters, not 13a's whole sentences
    unnamed = score_translations(JA_HYPS, JA_REFS)
    assert "|tok:char|" in unnamed["bleu_signature"] and unnamed["headline"] == "chrf"


def test_chinese_bleu_is_scored_on_characters():
    scores = score_translations(ZH_HYPS, ZH_REFS, tgt_lang="zh")
    expected = sacrebleu.corpus_bleu(ZH_HYPS, [ZH_REFS], tokenize="zh")
    assert scores["bleu"] == round(expected.score, 2) > 40
    assert "|tok:zh|" in scores["bleu_signature"] and scores["headline"] == "bleu"


def test_a_missing_tokenizer_scores_characters_warns_once_and_heads_with_chrf(monkeypatch, caplog):
    hide(monkeypatch, "MeCab")
    with caplog.at_level(logging.WARNING, logger="tfm.prediction.scoring"):
        first = score_translations(JA_HYPS, JA_REFS, tgt_lang="ja")
        second = score_translations(JA_HYPS, JA_REFS, tgt_lang="ja")
    assert first == second and first["headline"] == "chrf"
    assert "|tok:char|" in first["bleu_signature"]
    expected = sacrebleu.corpus_bleu(JA_HYPS, [JA_REFS], tokenize="char").score
    assert first["bleu"] == round(expected, 2) > 50
    assert first["chrf"] == round(sacrebleu.corpus_chrf(JA_HYPS, [JA_REFS]).score, 2)
    [warning] = [r.getMessage() for r in caplog.records]
    assert "ja-mecab tokenizer, which is not installed" in warning and "tfm[ja]" in warning
    assert not bleu_is_prescribed("ja", unspaced=True)
    hide(monkeypatch, "ipadic")  # spaced text in a language whose tokenizer is missing: 13a
    assert "|tok:13a|" in score_translations(["a b"], ["a b"], tgt_lang="ko")["bleu_signature"]


def test_a_script_without_spaces_and_without_a_tokenizer_is_scored_on_characters(caplog):
    """13a sees each Thai sentence as one word: near-perfect translations score BLEU 0."""
    assert sacrebleu.corpus_bleu(TH_HYPS, [TH_REFS]).score == 0.0
    with caplog.at_level(logging.WARNING, logger="tfm.prediction.scoring"):
        scores = score_translations(TH_HYPS, TH_REFS, tgt_lang="th")
    expected = sacrebleu.corpus_bleu(TH_HYPS, [TH_REFS], tokenize="char").score
    assert scores["bleu"] == round(expected, 2) > 50 and scores["headline"] == "chrf"
    assert "|tok:char|" in scores["bleu_signature"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith("BLEU on 'th' text: sacreBLEU prescribes no tokenizer for its")
    assert not bleu_is_prescribed("th", unspaced=True) and bleu_is_prescribed("zh", unspaced=True)
    assert bleu_is_prescribed("th", unspaced=False)  # a corpus not in Thai script after all


def test_spaced_languages_keep_13a_and_head_with_bleu():
    scores = score_translations(["Ein Hund läuft."], ["Ein Hund rennt."], tgt_lang="de")
    assert "|tok:13a|" in scores["bleu_signature"] and scores["headline"] == "bleu"
