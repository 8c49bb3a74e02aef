"""A long text as a batch of its pieces (`tokbackend._segments.cuts`): pieces that are the text,
HF's ids joining at every cut wherever the build-time premise says so, and each gate failing on a
planted defect of its class: a pipeline whose ids do not join (the premise), a wrong cut (the
long-prompt class, `tokbackend verify`)."""

from __future__ import annotations

import pytest
from defects import cut_before_the_newline, serve_with_cut
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import tokbackend
from equivalence.corpus import prompt_text
from equivalence.differential import find_mismatch, in_every_form
from equivalence.strategies import input_classes, long_prompts
from tokbackend._segments.cuts import CUT, FEWEST_PIECES, LONG_TEXT_CHARS, cut, cuts_fail

PRINTABLE = [chr(code) for code in range(0x21, 0x7F)]


def _ids_of(tokenizer):
    return lambda texts: [tokenizer.encode(text, add_special_tokens=False) for text in texts]


def _encoder(tokenizer):
    return lambda text: tokenizer.encode(text, add_special_tokens=False)


def _joined(encode, cutter):
    """`encode` of each piece `cutter` makes, concatenated."""
    return lambda text: [token_id for piece in cutter(text) for token_id in encode(piece)]


def _long_texts() -> list[str]:
    return [prompt_text(seed, 3 * LONG_TEXT_CHARS, kind) for seed in range(2) for kind in ("mixed", "code", "prose")]


# -- the pieces ------------------------------------------------------------------------------


PARTS = ["a", "b", " ", "\n", "\n\n", ".", "\t", "{", "\u00e9", "\u4e2d", "\r\n"]


@given(
    st.lists(st.sampled_from(PARTS), max_size=200).map("".join),
    st.integers(1, 40),
    st.integers(1, 5),
)
def test_the_pieces_are_the_text_each_ending_at_a_cut(text, piece_chars, fewest):
    pieces = cut(text, piece_chars, fewest)
    assert "".join(pieces) == text
    assert len(pieces) == 1 or len(pieces) >= fewest
    end = 0
    for piece in pieces[:-1]:
        end += len(piece)
        assert len(piece) >= piece_chars
        assert CUT.match(text, end - 1), (text, end)  # a newline ends the piece, a printable character follows
    assert len(pieces) == 1 or len(pieces[-1]) >= piece_chars


def test_a_text_without_a_cut_or_too_short_is_one_piece():
    assert cut("x\n y" * 10_000) == ["x\n y" * 10_000]  # a space after every newline
    assert cut("a\nb" * 100) == ["a\nb" * 100]
    text = prompt_text(3, 4 * LONG_TEXT_CHARS, "prose")
    assert 2 * FEWEST_PIECES < len(cut(text)) <= 4 * FEWEST_PIECES  # about one piece a PIECE_CHARS
    assert cut(text[: LONG_TEXT_CHARS - 1]) == [text[: LONG_TEXT_CHARS - 1]]  # fewer than FEWEST_PIECES: whole


# -- the premise, per pipeline -----------------------------------------------------------------


@pytest.mark.parametrize(
    "family, joins",
    [
        ("qwen3", True),
        ("bert", True),
        ("gpt2", False),  # `\s+(?!\S)`: " \n" whole at a text's end, split before a word
        ("mistral-metaspace", False),  # prepend_scheme="first": "▁" before every piece's first word
        ("gemma3", False),  # no pre-tokenizer: "\n" merges with what follows
    ],
)
def test_the_premise_holds_exactly_where_hfs_ids_join(family, joins):
    """The build-time premise against HF's ids of long corpus texts cut every 512 characters:
    where it holds they all join; where it fails, some do not (it fails on the real defect)."""
    from equivalence.families import build_family

    hf = build_family(family, "small")
    why = cuts_fail(_ids_of(hf), [str(token) for token in hf.added_tokens_decoder.values()])
    assert (why is None) is joins, why
    encode = _encoder(hf)
    cut_often = _joined(encode, lambda text: cut(text, 512, 2))
    joined = [cut_often(text) == encode(text) for text in _long_texts()]
    assert all(joined) if joins else not all(joined)


def test_an_added_token_that_takes_the_newline_before_it_fails_the_premise():
    from tokenizers import AddedToken

    from equivalence.families import build_family

    hf = build_family("qwen3", "small")
    hf.add_tokens([AddedToken("<tool>", lstrip=True)])
    why = cuts_fail(_ids_of(hf), [str(token) for token in hf.added_tokens_decoder.values()])
    assert why is not None and "<tool>" in why
    assert cuts_fail(_ids_of(hf), ["a\n<b>"]) == "the added token 'a\\n<b>' holds a newline before a printable character"


@pytest.mark.parametrize("model", ["qwen3.6", pytest.param("qwen3", marks=pytest.mark.slow)])  # as conftest.py does
@pytest.mark.parametrize("input_class", ["mixed_scripts", "whitespace_runs", "special_tokens_in_text", "combining_marks"])
def test_hfs_ids_join_at_every_cut_of_each_input_class(model, input_class):
    """The premise's claim, searched: texts of an input class joined by newlines before a printable
    character, cut at every cut, against HF's ids of the whole."""
    hf = tokbackend.load_hf(model)
    strategy = input_classes([str(token) for token in hf.added_tokens_decoder.values()])[input_class]
    texts = st.lists(st.tuples(strategy(), st.sampled_from(PRINTABLE)), min_size=2, max_size=4).map(
        lambda parts: "\n".join(start + text for text, start in parts)
    )
    encode = _encoder(hf)
    cut_everywhere = _joined(encode, lambda text: cut(text, 1, 2))
    mismatch = find_mismatch(encode, cut_everywhere, texts, input_class, settings.get_profile("ci"))
    assert mismatch is None, mismatch.report()


def test_the_search_finds_a_cut_before_the_newline():
    """The search above fails on a planted defect: pieces that end before the newline."""
    hf = tokbackend.load_hf("qwen3.6")
    encode = _encoder(hf)
    texts = st.lists(st.sampled_from(["x.", "a  ", "b", "\u00e9!"]), min_size=2, max_size=4).map("\nA".join)
    wrong = _joined(encode, lambda text: cut_before_the_newline(text, 1, 2))
    mismatch = find_mismatch(encode, wrong, texts, "cuts", settings.get_profile("ci"))
    assert mismatch is not None


# -- served ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fastokens_pair():
    hf = tokbackend.load_hf("qwen3.6")
    return hf, tokbackend.accelerate(hf, "fastokens")


def test_fastokens_gets_long_texts_in_pieces_and_they_encode_as_hf(fastokens_pair):
    hf, fast = fastokens_pair
    assert fast.tokbackend.stats()["routing"]["long_texts"].startswith("cut at newlines into pieces")
    counted: list[tuple[int, int]] = []

    def counting(text):
        pieces = cut(text)
        counted.append((len(text), len(pieces)))
        return pieces

    build = fast.tokbackend.build
    serve_with_cut(fast, counting)
    try:
        encode = in_every_form(fast)
        for text in _long_texts():
            assert encode(text) == hf.encode(text)
        assert fast([_long_texts()[0], "short"])["input_ids"] == hf([_long_texts()[0], "short"])["input_ids"]
    finally:
        fast.tokbackend._serving = (build, fast.tokbackend._serving[1])
    # every long text went as pieces, in both forms (shorter ones reach `cut` too, one by one)
    assert sum(length >= LONG_TEXT_CHARS for length, _ in counted) >= 2 * len(_long_texts())
    assert all(pieces > 1 for length, pieces in counted if length >= LONG_TEXT_CHARS), counted


def test_a_wrong_cut_is_found_by_the_long_prompt_class(fastokens_pair):
    hf, fast = fastokens_pair
    build = fast.tokbackend.build
    serve_with_cut(fast, cut_before_the_newline)
    try:
        unshrunk = [phase for phase in Phase if phase is not Phase.shrink]
        profile = settings(settings.get_profile("ci"), max_examples=3, phases=unshrunk, suppress_health_check=list(HealthCheck))
        mismatch = find_mismatch(hf.encode, in_every_form(fast), long_prompts(), "long_prompts", profile)
    finally:
        fast.tokbackend._serving = (build, fast.tokbackend._serving[1])
    assert mismatch is not None


def test_a_pipeline_whose_ids_do_not_join_gets_long_texts_whole(monkeypatch):
    """gpt2's pipeline fails the premise: its long texts go whole and encode as HF. With the
    premise planted away, the same texts cut differ from HF: the premise is what keeps them exact."""
    from equivalence.families import build_family

    hf = build_family("gpt2", "small")
    fast = tokbackend.accelerate(hf, "fastokens")
    assert fast.tokbackend.stats()["routing"]["long_texts"].startswith("whole: ids do not join at a newline")
    texts = _long_texts()
    assert [fast.encode(text) for text in texts] == [hf.encode(text) for text in texts]
    monkeypatch.setattr("tokbackend._build.cuts_fail", lambda hf_ids, added_tokens: None)
    unguarded = tokbackend.accelerate(build_family("gpt2", "small"), "fastokens")
    assert unguarded.tokbackend.stats()["routing"]["long_texts"].startswith("cut")
    assert [unguarded.encode(text) for text in texts] != [hf.encode(text) for text in texts]


def test_gigatoken_cuts_its_long_texts_itself():
    hf = tokbackend.load_hf("qwen3.6")
    fast = tokbackend.accelerate(hf, "gigatoken")
    assert fast.tokbackend.stats()["routing"]["long_texts"] == "whole: gigatoken gains nothing from cutting them"
