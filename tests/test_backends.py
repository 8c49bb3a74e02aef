"""Backends v2: auto's choice, the renewal wrapper on any backend, the truncation-aware fast path."""

from __future__ import annotations

import logging

import pytest

import tokbackend
from equivalence.corpus import prompt_text
from tokbackend import auto
from tokbackend.backends.fastokens import FastokensBackend
from tokbackend.backends.hf import HFBackend
from tokbackend.backends.renewal import RenewingBackend
from tokbackend.policy import FallbackReason, TokenizerDefaults, fast_path_reason

LONG = "The quick brown fox 毕老师 don't 12345 " * 400


class FastButWrong(HFBackend):
    """A planted defect for auto: answers instantly and wrongly (one id per text), and needs no
    guard, so only the probe stands between it and the routing."""

    name = "fast-but-wrong"

    def encode(self, text):
        return [0]

    def encode_batch(self, texts):
        return [self.encode(text) for text in texts]


@pytest.fixture
def fresh_auto_cache(monkeypatch, tmp_path):
    """auto's remembered choices live in a cache of the test's own."""
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_auto_chooses_an_exact_backend_and_says_why(hf_tokenizer, fresh_auto_cache, caplog):
    with caplog.at_level(logging.INFO, logger="tokbackend"):
        fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert {routing["single"], routing["batch"]} <= {"gigatoken", "fastokens"}
    assert "one text" in routing["reason"] and "batch of" in routing["reason"]
    assert "auto" in fast.tokbackend.describe() and routing["single"] in fast.tokbackend.describe()
    assert fast.encode(LONG) == hf_tokenizer.encode(LONG)
    assert fast([LONG, "x"])["input_ids"] == hf_tokenizer([LONG, "x"])["input_ids"]
    assert fast.tokbackend.stats()["fast_texts"] == 3
    # a second start remembers the choice and builds only the chosen backends
    again = tokbackend.accelerate(hf_tokenizer, "auto")
    assert again.tokbackend.stats()["routing"]["single"] == routing["single"]
    assert "(remembered)" in again.tokbackend.stats()["routing"]["reason"]


def test_a_remembered_choice_is_not_reused_by_another_tokbackend_version(hf_tokenizer, monkeypatch):
    """What auto timed includes tokbackend's own call paths (fastokens' single-text form, say)."""
    text_json = hf_tokenizer.backend_tokenizer.to_str()
    key = auto._choice_key(text_json)
    assert auto._choice_key(text_json) == key
    monkeypatch.setattr(tokbackend, "__version__", tokbackend.__version__ + ".post1")
    assert auto._choice_key(text_json) != key


def test_auto_never_routes_to_a_backend_the_probe_rejects(hf_tokenizer, fresh_auto_cache, register_for_test):
    register_for_test("fast-but-wrong", FastButWrong)
    fast = tokbackend.accelerate(hf_tokenizer, "auto")
    routing = fast.tokbackend.stats()["routing"]
    assert "fast-but-wrong" not in (routing["single"], routing["batch"])
    assert "fast-but-wrong not exact here" in routing["reason"]
    assert fast.encode("room 101") == hf_tokenizer.encode("room 101")


def test_auto_without_the_probe_would_route_to_the_planted_defect(hf_tokenizer, fresh_auto_cache, register_for_test):
    """The gate above is the probe: with it off, the instant wrong backend wins the timing."""
    register_for_test("fast-but-wrong", FastButWrong)
    fast = tokbackend.accelerate(hf_tokenizer, "auto", probe=False)
    assert fast.tokbackend.stats()["routing"]["single"] == "fast-but-wrong"
    assert fast.encode("room 101") != hf_tokenizer.encode("room 101")


def test_auto_with_no_exact_candidate_is_a_clear_error(hf_tokenizer, fresh_auto_cache, monkeypatch, register_for_test):
    register_for_test("fast-but-wrong", FastButWrong)
    monkeypatch.setattr(auto, "candidates", lambda: ["fast-but-wrong"])
    with pytest.raises(tokbackend.BackendUnavailableError, match="no backend is exact.*fast-but-wrong.*disagrees"):
        tokbackend.accelerate(hf_tokenizer, "auto")
    fast = tokbackend.accelerate(hf_tokenizer, "auto", allow_hf_fallback=True)
    assert not fast.tokbackend.fast_path_enabled
    assert fast.encode("room 101") == hf_tokenizer.encode("room 101")


def test_renewal_wraps_any_backend(hf_tokenizer):
    """The memory-budget wrapper is not gigatoken's: around fastokens it renews and stays exact."""
    text_json = hf_tokenizer.backend_tokenizer.to_str()
    built = []

    def build():
        built.append(1)
        return FastokensBackend(text_json, FastokensBackend.options_for_scanning())

    backend = RenewingBackend(build, budget_mib=1)
    texts = [f"{LONG} {index} {'é' * index}" for index in range(40)]
    expected = [hf_tokenizer.encode(text, add_special_tokens=False) for text in texts]
    assert [backend.encode(text) for text in texts] == expected
    assert backend.encode_batch(texts) == expected
    assert backend.name == "fastokens" and backend.guard_family == "fastokens"
    assert len(built) >= 2 and backend.stats()["cache_budget_mib"] == 1


# -- fastokens' two single-text forms ---------------------------------------------------------------


def test_both_fastokens_single_text_forms_give_hfs_ids(hf_tokenizer):
    backend = FastokensBackend(hf_tokenizer.backend_tokenizer.to_str(), FastokensBackend.options_for_scanning())
    texts = ["", " ", "x", LONG, "<|im_start|>user\nhi<|im_end|>", "e\u0301 \U0001f468\u200d\U0001f469 1\ufe0f\u20e3 ١٢٣ 𝔘"]
    texts += [prompt_text(seed, 5000, kind) for seed in range(3) for kind in ("code", "prose", "mixed")]
    for text in texts:
        expected = hf_tokenizer.encode(text, add_special_tokens=False)
        assert backend._ids(text) == expected and backend._flat(text) == expected, text[:40]


@pytest.mark.parametrize("slow", ["ids", "flat"])
def test_a_warmed_fastokens_backend_serves_single_texts_with_the_faster_form(hf_tokenizer, monkeypatch, slow):
    """The choice is measured: whichever form is made slow here is not the one kept."""
    import time

    original = getattr(FastokensBackend, f"_{slow}")

    def slowed(self, text):
        time.sleep(0.005)
        return original(self, text)

    monkeypatch.setattr(FastokensBackend, f"_{slow}", slowed)
    backend = FastokensBackend(hf_tokenizer.backend_tokenizer.to_str())
    kept = "flat" if slow == "ids" else "ids"
    assert backend.single_form == kept and backend.stats()["fastokens_single_form"] == kept
    assert backend.single_form_ms[slow] > backend.single_form_ms[kept]
    assert backend.encode(LONG) == hf_tokenizer.encode(LONG, add_special_tokens=False)


# -- the truncation-aware fast path --------------------------------------------------------------


def test_truncation_that_cuts_nothing_is_answered_by_the_backend(fast_tokenizer, hf_tokenizer):
    before = fast_tokenizer.tokbackend.stats()
    length = len(hf_tokenizer.encode(LONG))
    for kwargs in ({"truncation": True, "max_length": length + 1}, {"truncation": True, "max_length": length}):
        assert fast_tokenizer(LONG, **kwargs)["input_ids"] == hf_tokenizer(LONG, **kwargs)["input_ids"]
        assert fast_tokenizer.encode(LONG, **kwargs) == hf_tokenizer.encode(LONG, **kwargs)
    after = fast_tokenizer.tokbackend.stats()
    assert after["fast_texts"] == before["fast_texts"] + 4
    assert after["fallbacks"].get("truncation", 0) == before["fallbacks"].get("truncation", 0)


@pytest.mark.parametrize("side", ["left", "right"])
def test_truncation_that_cuts_goes_to_hf_on_the_tokenizers_side(fresh_pair, side):
    hf, fast = fresh_pair
    hf.truncation_side = fast.truncation_side = side
    length = len(hf.encode(LONG))
    kwargs = {"truncation": True, "max_length": length - 7}
    assert fast.encode(LONG, **kwargs) == hf.encode(LONG, **kwargs)
    assert fast([LONG, "short"], **kwargs)["input_ids"] == hf([LONG, "short"], **kwargs)["input_ids"]
    assert fast.tokbackend.stats()["fallbacks"]["truncation"] == 3


def test_the_policy_is_one_pure_function():
    defaults = TokenizerDefaults(split_special_tokens=False, returns_token_type_ids=False)
    assert fast_path_reason("x", None, {"truncation_strategy": "longest_first", "max_length": 8}, defaults) is None
    assert fast_path_reason("x", None, {"truncation_strategy": "longest_first"}, defaults) is FallbackReason.TRUNCATION
    only_second = {"truncation_strategy": "only_second", "max_length": 8}
    assert fast_path_reason("x", None, only_second, defaults) is FallbackReason.TRUNCATION
    assert fast_path_reason("x", "y", {}, defaults) is FallbackReason.TEXT_PAIR
    assert fast_path_reason([1, 2], None, {}, defaults) is FallbackReason.NON_TEXT_INPUT
    assert fast_path_reason("x", None, {"future": 1}, defaults) is FallbackReason.UNKNOWN_KWARG
    assert fast_path_reason("x", None, {}, TokenizerDefaults(True, False)) is FallbackReason.SPLIT_SPECIAL_TOKENS
