"""The added-token split is HuggingFace's over the rule's whole flag space (`tokbackend._added_tokens`),
and what users see with random added tokens on every family and backend is HF's ids; each
harness finds a planted split of the classes it claims (one pass, leftmost-first, flags ignored)."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis.errors import NoSuchExample

import tokbackend
from tokbackend._added_tokens import AddedTokens
from tokbackend.equivalence.added_tokens import accelerated_matches_hf, split_cases, split_matches_hf
from tokbackend.equivalence.families import FAMILY_NAMES, build_family

# The split alone: each example builds a character-level tokenizer (milliseconds).
SPLIT_SETTINGS = settings(
    max_examples=600, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
# How a planted split is looked for: found, not shrunk.
FINDING = settings(SPLIT_SETTINGS, max_examples=2000, phases=[Phase.generate])


@given(split_cases())
@SPLIT_SETTINGS
def test_the_split_is_hfs_over_the_whole_flag_space(case):
    """Both kinds of token (normalized or not, special or not), lstrip, rstrip, single_word,
    `split_special_tokens`, overlapping and prefix tokens, eight normalizers."""
    difference = split_matches_hf(case)
    assert difference is None, difference


def _one_pass(tokenizer_json: str, text: str, split_special_tokens: bool):
    """Every token in one leftmost-longest pass over the raw text (the splitter before 0.3.0)."""
    ids = AddedTokens.from_tokenizer_json(tokenizer_json).ids
    pattern = re.compile("(" + "|".join(map(re.escape, sorted(ids, key=len, reverse=True))) + ")")
    return [part if index % 2 == 0 else ids[part] for index, part in enumerate(pattern.split(text)) if part]


def _shortest_first(tokenizer_json: str, text: str, split_special_tokens: bool):
    """HF's rule, but the shortest token wins where two start at one position."""
    tokens = AddedTokens.from_tokenizer_json(tokenizer_json)
    for one_pass in (tokens._raw, tokens._normalized):
        if one_pass.pattern is not None:
            one_pass.pattern = re.compile("|".join(map(re.escape, sorted(one_pass.tokens, key=len))))
    return tokens.split(text, split_special_tokens)


def _flag_ignored(flag: str):
    def split(tokenizer_json: str, text: str, split_special_tokens: bool):
        tokens = AddedTokens.from_tokenizer_json(tokenizer_json)
        for one_pass in (tokens._raw, tokens._normalized):
            for content, token in list(one_pass.tokens.items()):
                one_pass.tokens[content] = type(token)(**{**token.__dict__, flag: False})
        return tokens.split(text, split_special_tokens)

    split.__name__ = f"ignores_{flag}"
    return split


def _special_kept(tokenizer_json: str, text: str, split_special_tokens: bool):
    """`split_special_tokens` ignored: special tokens always matched."""
    return AddedTokens.from_tokenizer_json(tokenizer_json).split(text, False)


@pytest.mark.parametrize(
    "defect",
    [
        _one_pass,
        _shortest_first,
        _flag_ignored("lstrip"),
        _flag_ignored("rstrip"),
        _flag_ignored("single_word"),
        _special_kept,
    ],
    ids=lambda defect: defect.__name__.strip("_"),
)
def test_the_split_harness_finds_a_planted_defect(defect):
    try:
        found = find(split_cases(), lambda case: split_matches_hf(case, defect) is not None, settings=FINDING)
    except NoSuchExample:
        pytest.fail(f"the split harness passed a split that {defect.__name__.strip('_')}")
    assert split_matches_hf(found) is None  # the real split is right where the planted one is wrong


# One random set of added tokens per family and backend in CI, two in -m slow (the CI set is
# the first of those two): each set is a build of the family on every backend.
@pytest.mark.parametrize("token_sets", [1, pytest.param(2, marks=pytest.mark.slow)])
@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_ids_with_random_added_tokens_are_hfs_on_every_backend(family, token_sets):
    """Random added tokens of every flag on the family's own (`tokbackend.equivalence.added_tokens`),
    accelerated on gigatoken, fastokens and HF's own as backend, against HF in every call form:
    encode, `__call__`, a batch, arrays, a chat template."""
    started, served = time.perf_counter(), 0
    for backend in ("gigatoken", "fastokens", "hf"):
        run = accelerated_matches_hf(family, backend, seed=0, token_sets=token_sets, texts_per_set=24)
        assert not run.mismatches, "\n".join(mismatch.report() for mismatch in run.mismatches[:3])
        served += run.fast_texts
        print(
            f"{family} on {backend}: {run.compared} texts compared, {run.fast_texts} fast, handed over {run.fallbacks}"
        )
    assert served > 0, "no backend answered any text: the harness proved nothing"
    print(f"{family}: {time.perf_counter() - started:.1f} s")


@pytest.fixture
def one_pass_everywhere(monkeypatch):
    """Planted: every tokenizer's added tokens taken as one pass over the raw text (the rule
    before 0.3.0, which also handed whole texts to the backends' own pass)."""
    original = AddedTokens.__init__

    def one_pass(self, *args, **kwargs):
        original(self, *args, **kwargs)
        self.one_pass = True

    monkeypatch.setattr(AddedTokens, "__init__", one_pass)


@pytest.mark.parametrize("backend", ["gigatoken", "hf"])
def test_the_accelerated_harness_finds_the_one_pass_split(one_pass_everywhere, backend):
    """With the boot probe off (it catches this too: below) and the cache never stepping aside,
    the harness finds wrong ids where the planted rule decides them: gigatoken's own pass over
    whole texts, and the split handing pieces to HF's. (fastokens' own pass over whole texts
    splits these sets as HF does, and the cache's premise check refuses the planted split.)"""
    options = {"probe": False, "segment_cache_steps_aside": False}
    run = accelerated_matches_hf("llama3", backend, seed=0, token_sets=3, texts_per_set=24, **options)
    assert run.mismatches and run.fast_texts


def test_the_boot_probe_finds_the_one_pass_split(one_pass_everywhere):
    """The probe puts the model's added tokens side by side and overlapping: the reviewer's
    Llama 3 example turns the fast path off at start-up (before: it served wrong ids)."""
    hf = build_family("llama3", "small")
    hf.add_tokens(["<<"])
    stats = tokbackend.accelerate(hf, "fastokens").tokbackend.stats()
    assert not stats["fast_path_enabled"] and "probe mismatch" in stats["disabled_reason"], stats["disabled_reason"]


@pytest.mark.parametrize("backend", ["gigatoken", "fastokens", "hf"])
def test_the_reviewers_examples(backend):
    """Llama 3 with `add_tokens(["<<"])` (a normalized token beside the specials) on
    "x = 1 <<|eot_id|> y", and Qwen3 with `add_tokens(["=<"])` on "=<|im_end|>": HF's ids, the
    backend answering (before: wrong ids, nothing counted)."""
    for family, token, text in (("llama3", "<<", "x = 1 <<|eot_id|> y"), ("qwen3", "=<", "=<|im_end|>")):
        hf = build_family(family, "small")
        hf.add_tokens([token])
        fast = tokbackend.accelerate(hf, backend)
        assert fast.encode(text) == hf.encode(text)
        assert fast([text, text + text])["input_ids"] == hf([text, text + text])["input_ids"]
        stats = fast.tokbackend.stats()
        assert stats["fast_texts"] == 3 and not stats["fallbacks"], stats
