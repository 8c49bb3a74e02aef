"""The segment cache: exact by construction, proven against HF on conversations; bounded, shared, safe."""

from __future__ import annotations

import contextlib
import copy
import itertools
import pickle
import threading
import uuid
from array import array

import pytest
from conftest import held_by_another_thread
from defects import CutsAnywhere, OffByOne, ShortestFirst, memo_one_id_short, serve_with_splitter
from hypothesis import Phase, settings

import tokbackend
from tokbackend._segments import DEFAULT_SEGMENT_CACHE_MIB, SegmentCache
from tokbackend.equivalence.conversations import conversations, guarded_sample, turn_by_turn
from tokbackend.equivalence.differential import find_mismatch


def _added(tokenizer) -> list[str]:
    return [str(token) for token in tokenizer.added_tokens_decoder.values()]


def _guarded(fast) -> list[int]:
    return guarded_sample(fast.tokbackend.guard.code_points)


def _cached(hf, backend, mib=64):
    """The cache on every call: tests of exactness and bounds must not see it step aside."""
    fast = tokbackend.accelerate(hf, backend, segment_cache_mib=mib, segment_cache_steps_aside=False)
    assert fast.tokbackend.stats()["segment_cache"]["enabled"]
    return fast


@pytest.fixture(scope="module")
def cached_pair(hf_tokenizer, backend_name):
    return hf_tokenizer, _cached(hf_tokenizer, backend_name)


def _in_form(fast, form: str):
    """`fast.encode` asked for lists, for arrays (`ids_as_arrays()`, as SGLang asks for a text
    prompt's ids) or the two by turns, so that what the memo keeps from a call in one form is read
    by a call in the other; each call's form is checked, and its ids come back as a list."""
    calls = itertools.count()

    def encode(text: str) -> list[int]:
        as_arrays = form == "arrays" or (form == "alternating" and next(calls) % 2 == 1)
        with tokbackend.ids_as_arrays() if as_arrays else contextlib.nullcontext():
            ids = fast.encode(text)
        assert type(ids) is (array if as_arrays else list)
        return list(ids)

    return encode


@pytest.mark.parametrize("form", ["lists", "arrays", "alternating"])
def test_conversations_are_exact_turn_by_turn(cached_pair, form):
    hf, fast = cached_pair
    strategy = conversations(_added(hf), _guarded(fast))
    profile = settings.get_profile("ci")
    cuts = _added(hf)
    ours = turn_by_turn(_in_form(fast, form), cuts)
    mismatch = find_mismatch(turn_by_turn(hf.encode, cuts), ours, strategy, f"conversations in {form}", profile)
    assert mismatch is None, mismatch.report()
    stats = fast.tokbackend.stats()["segment_cache"]
    assert stats["hits"] > 0 and stats["misses"] > 0 and stats["entries"] > 0
    assert stats["prefix_hits"] > 0 and stats["prefixes"] > 0


def test_batches_of_conversations_are_exact(cached_pair):
    hf, fast = cached_pair
    texts = [
        "<|im_start|>system\nshared<|im_end|>\n<|im_start|>user\n" + body + "<|im_end|>\n"
        for body in ("a", " 's", "\u0301x", "<think>t</think>", "<|im_end", "\U000323b0's", "\u017f's", "")
    ]
    assert fast(texts)["input_ids"] == hf(texts)["input_ids"]
    assert fast(texts)["input_ids"] == hf(texts)["input_ids"]  # now from the cache


@pytest.mark.parametrize("defect", [OffByOne, CutsAnywhere, ShortestFirst])
def test_the_harness_finds_a_planted_split_defect(fresh_pair, defect):
    """The harness's conversations catch a splitter that cuts one character off, one that prefers
    the shorter of two added tokens starting at one position, and a prefix memo that reuses a
    prefix ending inside a longer added token (tokens that overlap so added here, as a deployment
    adding tool tokens would)."""
    hf, _ = fresh_pair
    fast = _cached(hf, "gigatoken")
    fast.add_special_tokens({"additional_special_tokens": ["<tool>", "<tool>_call"]})
    fast.encode("rebuild")
    assert fast.tokbackend.build.segments is not None
    tokens = {str(token): token_id for token_id, token in hf.added_tokens_decoder.items()}
    cuts = _added(hf)
    strategy = conversations(cuts, [])
    exact = find_mismatch(turn_by_turn(hf.encode, cuts), turn_by_turn(fast.encode, cuts), strategy, "exact", _ci())
    assert exact is None, exact.report()
    serve_with_splitter(fast, defect(tokens))
    # finding it is the point here, not shrinking it
    found_only = settings(_ci(), phases=[Phase.explicit, Phase.generate])
    planted = find_mismatch(
        turn_by_turn(hf.encode, cuts), turn_by_turn(fast.encode, cuts), strategy, "planted", found_only
    )
    assert planted is not None


def test_the_array_form_finds_a_memo_that_keeps_array_ids_one_short(fresh_pair, monkeypatch):
    """A memo whose chunks made by array calls lose their last id: the conversations in lists
    never read one and stay exact; in arrays they do, and the harness finds it."""
    hf, _ = fresh_pair
    fast = _cached(hf, "gigatoken")
    monkeypatch.setattr(SegmentCache, "remember", memo_one_id_short(SegmentCache.remember, only=array))
    cuts = _added(hf)
    strategy = conversations(cuts, [])
    reference = turn_by_turn(hf.encode, cuts)
    lists = find_mismatch(reference, turn_by_turn(_in_form(fast, "lists"), cuts), strategy, "lists", _ci())
    assert lists is None, lists.report()
    found_only = settings(_ci(), phases=[Phase.explicit, Phase.generate])
    assert (
        find_mismatch(reference, turn_by_turn(_in_form(fast, "arrays"), cuts), strategy, "arrays", found_only)
        is not None
    )


def test_a_growing_conversation_in_arrays_reuses_the_memo_in_arrays(cached_pair):
    """An agent's turns asked for as arrays: each an `array('q')` equal to HF's ids, the memo hit
    from the second turn with ids kept as arrays, new pieces cached as the backend's arrays, and
    the caller's array its own."""
    hf, fast = cached_pair
    cache = fast.tokbackend.build.segments.cache
    marker = uuid.uuid4().hex  # pieces no other test cached
    text = (
        f"<|im_start|>system\nYou read files.<|im_end|>\n<|im_start|>user\n{marker}<|im_end|>\n<|im_start|>assistant\n"
    )
    before = cache.stats()["prefix_hits"]
    for turn in range(4):
        with tokbackend.ids_as_arrays():
            ids = fast.encode(text)
        assert type(ids) is array and ids.typecode == "q" and list(ids) == hf.encode(text)
        ids.append(-7)  # the caller's own: the memo keeps a copy
        text += (
            f"<tool_call>read {turn}</tool_call><|im_end|>\n<|im_start|>user\nfile "
            f"{turn}<|im_end|>\n<|im_start|>assistant\n"
        )
    assert cache.stats()["prefix_hits"] == before + 2
    assert all(
        type(chunk) is array
        for entry in cache._prefixes
        if entry.chunks
        for chunk in entry.chunks
        if entry.text in text
    )
    assert type(cache.get(f"user\n{marker}")) is array
    assert fast.encode(text) == hf.encode(text)  # a list, from the arrays the memo and the cache kept


def test_a_memo_made_by_list_calls_is_kept_in_arrays_once_an_array_call_reads_it(cached_pair):
    """Three turns asked for as lists, two as arrays: the first array turn copies the remembered
    ids into one array (rather than each later turn converting the lists again), the next shares
    it; every turn HF's ids."""
    hf, fast = cached_pair
    cache = fast.tokbackend.build.segments.cache
    text = f"<|im_start|>system\nagent {uuid.uuid4().hex}<|im_end|>\n<|im_start|>assistant\n"
    for turn in range(5):
        with tokbackend.ids_as_arrays() if turn >= 3 else contextlib.nullcontext():
            ids = fast.encode(text)
        assert type(ids) is (array if turn >= 3 else list) and list(ids) == hf.encode(text)
        newest = cache._prefixes[0]
        assert newest.text == text
        text += f"step {turn}<|im_end|>\n<|im_start|>user\nresult {turn}<|im_end|>\n<|im_start|>assistant\n"
    assert [type(chunk) for chunk in newest.chunks] == [array, array]


def test_growing_conversations_reuse_the_remembered_prefix(cached_pair):
    hf, fast = cached_pair
    cache = fast.tokbackend.build.segments.cache
    text = "<|im_start|>system\nYou plan.<|im_end|>\n<|im_start|>user\nfirst ask<|im_end|>\n<|im_start|>assistant\n"
    before = cache.stats()["prefix_hits"]
    for turn in range(3):  # the first turn is remembered without ids, the second with them
        ids = fast.encode(text)
        assert ids == hf.encode(text)
        text += f"answer {turn}<|im_end|>\n<|im_start|>user\nask {turn}<|im_end|>\n<|im_start|>assistant\n"
    assert cache.stats()["prefix_hits"] == before + 1
    ids = fast.encode(text)
    assert ids == hf.encode(text) and cache.stats()["prefix_hits"] == before + 2
    ids.append(-7)  # the caller's list is its own: the memo's ids are copied out
    assert fast.encode(text) == hf.encode(text)


def test_text_that_never_repeats_is_not_stored_and_its_ids_are_the_callers(cached_pair):
    hf, fast = cached_pair
    cache = fast.tokbackend.build.segments.cache
    text = "<|im_start|>user\n" + "unrepeated words " * 40 + "<|im_end|>\n"
    piece = text.removeprefix("<|im_start|>").split("<|im_end|>")[0]
    first = fast.encode(text)
    assert first == hf.encode(text) and cache._ids.get(piece) is None  # seen once: only its hash noted
    first.append(-7)  # handed out without a copy, so it must be the caller's alone
    second = fast.encode(text)
    assert second == hf.encode(text) and cache._ids.get(piece) is not None  # seen twice: stored
    second.append(-7)
    assert fast.encode(text) == hf.encode(text)


def test_a_remembered_prefix_is_not_reused_inside_a_longer_added_token(fresh_pair):
    hf, _ = fresh_pair
    fast = _cached(hf, "gigatoken")
    fast.add_special_tokens({"additional_special_tokens": ["<tool>", "<tool>_call"]})
    prefix = "<|im_start|>user\nrun <tool>"
    assert fast.encode(prefix) == hf.encode(prefix)
    for text in (prefix + "_call now", prefix + "_cal", prefix + " now"):
        assert fast.encode(text) == hf.encode(text), text
    assert not fast.tokbackend.build.segments.splitter.cuts_at(prefix + "_call", len(prefix))
    assert fast.tokbackend.build.segments.splitter.cuts_at(prefix + " now", len(prefix))


def test_the_prefix_memo_is_bounded(hf_tokenizer):
    fast = _cached(hf_tokenizer, "fastokens", mib=1)
    for index in range(200):
        text = f"<|im_start|>user\nagent {index} " + "lorem ipsum " * 40 + "<|im_end|>\n<|im_start|>assistant\n"
        assert fast.encode(text) == hf_tokenizer.encode(text)
    stats = fast.tokbackend.stats()["segment_cache"]
    assert 0 < stats["prefix_bytes"] <= (1 << 20) // 4 and stats["prefixes"] <= 64


def _ci():
    return settings.get_profile("ci")


def test_the_guard_applies_per_segment(cached_pair):
    hf, fast = cached_pair
    code_point = max(fast.tokbackend.guard.code_points)
    text = f"<|im_start|>user\nplain<|im_end|>\n<|im_start|>user\nx{chr(code_point)}'s<|im_end|>\n"
    before = fast.tokbackend.stats()["fallbacks"].get("unicode_guard", 0)
    assert fast.encode(text) == hf.encode(text)
    assert fast.tokbackend.stats()["fallbacks"]["unicode_guard"] == before + 1


def test_a_growing_conversation_sends_a_guarded_message_to_hf_twice_at_most(cached_pair):
    """An agent's conversation grows by a turn a request; one early message holds a guarded code
    point. HF answers that message twice at most: later turns reuse its ids (and the remembered prefix),
    where sending it, or the whole text, to HF on every turn made each request slower than HF."""
    hf, fast = cached_pair
    code_point = max(fast.tokbackend.guard.code_points)
    conversation = f"<|im_start|>user\nx{chr(code_point)}'s question, " + "with context " * 50 + "<|im_end|>\n"
    before = fast.tokbackend.stats()["fallbacks"].get("unicode_guard", 0)
    for turn in range(6):
        conversation += f"<|im_start|>assistant\nanswer {turn}<|im_end|>\n<|im_start|>user\nnext {turn}<|im_end|>\n"
        assert fast.encode(conversation) == hf.encode(conversation)
    # the first turn, and at most the second (the cache stores a long piece the second time it
    # meets it, a short one at once)
    assert fast.tokbackend.stats()["fallbacks"]["unicode_guard"] - before in (1, 2)


def test_the_cache_is_bounded_and_evicts(hf_tokenizer):
    fast = _cached(hf_tokenizer, "fastokens", mib=1)
    for index in range(400):
        text = f"<|im_start|>user\nmessage {index} " + "lorem ipsum " * 60 + "<|im_end|>\n"
        for _ in range(2):  # a piece is stored the second time it is seen
            assert fast.encode(text) == hf_tokenizer.encode(text)
    stats = fast.tokbackend.stats()["segment_cache"]
    assert stats["evictions"] > 0 and stats["bytes"] <= 1 << 20


def test_it_is_on_by_default_and_none_turns_it_off(hf_tokenizer):
    default = tokbackend.accelerate(hf_tokenizer, "fastokens")
    stats = default.tokbackend.stats()["segment_cache"]
    assert stats["enabled"] and stats["budget_mib"] == DEFAULT_SEGMENT_CACHE_MIB
    fast = tokbackend.accelerate(hf_tokenizer, "fastokens", segment_cache_mib=None)
    assert fast.tokbackend.stats()["segment_cache"] == {"enabled": False}
    assert fast.tokbackend.build.segments is None
    assert fast.encode("<|im_start|>x") == hf_tokenizer.encode("<|im_start|>x")


def test_a_normalized_added_token_is_split_here_as_hf_does(fresh_pair):
    """transformers adds non-special tokens as normalized: matched after NFC, in a second pass.
    The cache splits such texts with HF's two passes (before: it was off for them)."""
    hf, _ = fresh_pair
    fast = _cached(hf, "gigatoken")
    fast.add_tokens(["<my_tool>"])
    text = "call <my_tool> now<|im_end|>"
    reference = tokbackend.load_hf("qwen3")
    reference.add_tokens(["<my_tool>"])
    before = fast.tokbackend.stats()["fast_texts"]
    assert fast.encode(text) == reference.encode(text)
    stats = fast.tokbackend.stats()
    assert stats["segment_cache"]["enabled"] and stats["segment_cache"]["misses"] > 0
    assert stats["fast_texts"] == before + 1 and not stats["fallbacks"]


def test_copies_share_it_and_pickles_start_empty(cached_pair):
    hf, fast = cached_pair
    text = "<|im_start|>user\nshared between copies<|im_end|>\n"
    fast.encode(text)
    clone = copy.deepcopy(fast)
    assert clone.tokbackend.build.segments.cache is fast.tokbackend.build.segments.cache
    hits = fast.tokbackend.stats()["segment_cache"]["hits"]
    assert clone.encode(text) == hf.encode(text)
    assert fast.tokbackend.stats()["segment_cache"]["hits"] > hits
    restored = pickle.loads(pickle.dumps(fast))
    assert restored.tokbackend.stats()["segment_cache"]["entries"] == 0
    assert restored.encode(text) == hf.encode(text)


def test_eight_threads_on_shared_pieces_stay_exact(cached_pair):
    hf, fast = cached_pair
    texts = [
        f"<|im_start|>system\nshared<|im_end|>\n<|im_start|>user\n{index % 7} 毕 don't<|im_end|>\n"
        for index in range(64)
    ]
    expected = [hf.encode(text) for text in texts]
    failures, finished = [], []

    def work(offset):
        for index in range(64):
            position = (index + offset) % 64
            if fast.encode(texts[position]) != expected[position]:
                failures.append(position)
        finished.append(offset)

    threads = [threading.Thread(target=work, args=(offset,)) for offset in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert len(finished) == 8 and failures == []


def test_long_pieces_with_the_same_length_and_ends_are_kept_apart(cached_pair):
    """Long pieces are keyed by their length and both ends; equality decides, so two pieces that
    agree there but differ inside never share ids, in one call or across calls."""
    hf, fast = cached_pair
    edge = "shared start of a tool result " * 3
    texts = [f"<|im_start|>tool\n{edge}{middle * 400}{edge}<|im_end|>\n" for middle in ("abc ", "xyz ", "a b ")]
    assert len({len(text) for text in texts}) == 1
    for _ in range(2):  # the second round is answered from the cache
        assert fast(texts)["input_ids"] == hf(texts)["input_ids"]
        assert [fast.encode(text) for text in texts] == [hf.encode(text) for text in texts]


def _agents_ending_alike_stay_exact(hf, fast) -> bool:
    """Two agents whose conversations have one length and the same last 200 characters, but
    different first messages: each turn's ids must be that agent's own."""
    same_end = "<|im_end|>\n<|im_start|>assistant\nthe same long answer " * 4 + "<|im_end|>\n<|im_start|>user\nsame?"
    texts = {
        name: f"<|im_start|>system\nshared<|im_end|>\n<|im_start|>user\n{name} asks" for name in ("alpha", "bravo")
    }
    exact = True
    for turn in range(3):
        for name in texts:
            texts[name] += same_end + f" {turn}<|im_end|>\n<|im_start|>assistant\n"
            exact = exact and fast.encode(texts[name]) == hf.encode(texts[name])
    return exact and fast.tokbackend.build.segments.cache.prefix_hits > 0


def test_remembered_texts_that_end_alike_are_kept_apart(hf_tokenizer):
    """The memo compares a remembered text's last characters before the whole of it (a filter,
    not the test): agents whose conversations end alike never share ids."""
    assert _agents_ending_alike_stay_exact(hf_tokenizer, _cached(hf_tokenizer, "fastokens"))


def test_a_memo_that_compared_only_the_ends_would_be_caught(hf_tokenizer, monkeypatch):
    """The planted defect for the test above: the filter alone decides."""
    from tokbackend._segments import SegmentCache

    def ends_only(self, text, splitter):
        for entry in self._prefixes:
            if text.startswith(entry.tail, len(entry.text) - len(entry.tail)) and splitter.cuts_at(text, entry.chars):
                if entry.chunks is not None:
                    self.prefix_hits += 1
                return entry
        return None

    monkeypatch.setattr(SegmentCache, "prefix_of", ends_only)
    assert not _agents_ending_alike_stay_exact(hf_tokenizer, _cached(hf_tokenizer, "fastokens"))


def test_it_steps_aside_for_text_that_never_repeats_and_comes_back_for_text_that_does(hf_tokenizer):
    """Requests that share nothing turn most calls into plain encodes (counted in `bypassed`);
    sampled calls keep looking, and an agent's growing conversation brings the cache back."""
    fast = tokbackend.accelerate(hf_tokenizer, "fastokens", segment_cache_mib=64)
    for index in range(80):
        text = f"<|im_start|>user\nunrelated {index} " + f"word{index} " * 60 + "<|im_end|>\n<|im_start|>assistant\n"
        assert fast.encode(text) == hf_tokenizer.encode(text)
    stats = fast.tokbackend.stats()["segment_cache"]
    assert stats["stepping_aside"] and 80 - 32 - 8 <= stats["bypassed"] < 80 - 32
    system = "<|im_start|>system\n" + "You are a careful coding agent. " * 40 + "<|im_end|>\n"
    conversation = system
    for turn in range(40):
        conversation += f"<|im_start|>user\nstep {turn}<|im_end|>\n<|im_start|>assistant\n"
        assert fast.encode(conversation) == hf_tokenizer.encode(conversation)
        conversation += f"done {turn}<|im_end|>\n"
    stats = fast.tokbackend.stats()["segment_cache"]
    assert not stats["stepping_aside"] and stats["prefix_hits"] > 0
    bypassed = stats["bypassed"]
    conversation += "<|im_start|>user\none more<|im_end|>\n"
    assert fast.encode(conversation) == hf_tokenizer.encode(conversation)
    assert fast.tokbackend.stats()["segment_cache"]["bypassed"] == bypassed


def test_with_stepping_aside_off_every_call_goes_through_it(hf_tokenizer):
    fast = _cached(hf_tokenizer, "fastokens")
    for index in range(80):
        text = f"<|im_start|>user\nunrelated {index} " + f"word{index} " * 60 + "<|im_end|>\n"
        assert fast.encode(text) == hf_tokenizer.encode(text)
    stats = fast.tokbackend.stats()["segment_cache"]
    assert not stats["stepping_aside"] and stats["bypassed"] == 0 and stats["misses"] >= 80


def test_a_child_forked_while_another_thread_holds_the_cache_lock_still_encodes(hf_tokenizer):
    import multiprocessing

    fast = _cached(hf_tokenizer, "fastokens")
    text = "<|im_start|>user\n" + "forked child " * 40 + "<|im_end|>\n"
    expected = hf_tokenizer.encode(text)
    child = multiprocessing.get_context("fork").Process(target=_encode_twice_and_exit, args=(fast, text, expected))
    with held_by_another_thread(fast.tokbackend.build.segments.cache._lock):
        child.start()
        child.join(60)
    if child.exitcode is None:
        child.kill()
    assert child.exitcode == 0


def _encode_twice_and_exit(fast, text, expected):
    import os

    ok = fast.encode(text) == expected and fast.encode(text) == expected  # the second stores it
    os._exit(0 if ok else 1)


def test_a_first_burst_sharing_a_system_prompt_stores_it_and_keeps_the_cache_in(hf_tokenizer):
    """A fresh replica's first burst: 40 requests share one system prompt. It is encoded once,
    stored at once (seen twice in one call), and counts as reuse, so the cache does not step aside."""
    fast = tokbackend.accelerate(hf_tokenizer, "fastokens", segment_cache_mib=64)
    system = "<|im_start|>system\n" + "Use the tools; answer in JSON. " * 30 + "<|im_end|>\n"
    burst = [system + f"<|im_start|>user\nagent {index}: " + "task " * 20 + "<|im_end|>\n" for index in range(40)]
    assert fast(burst)["input_ids"] == hf_tokenizer(burst)["input_ids"]
    stats = fast.tokbackend.stats()["segment_cache"]
    assert not stats["stepping_aside"] and stats["entries"] >= 1
    hits = stats["hits"]
    text = system + "<|im_start|>user\nagent 41<|im_end|>\n"
    assert fast.encode(text) == hf_tokenizer.encode(text)
    assert fast.tokbackend.stats()["segment_cache"]["hits"] > hits


# -- the cache's premise, checked per tokenizer -------------------------------------------------


@pytest.mark.parametrize(
    "family, backend, used",
    [
        ("mistral-metaspace", "gigatoken", False),  # Metaspace prepend_scheme="first": "▁" only at the start
        ("llama2-legacy", "gigatoken", True),  # a Prepend normalizer: every piece gets its "▁"
        ("gemma3", "fastokens", True),
        ("gpt2", "fastokens", True),
        ("deepseek-v3", "fastokens", True),
    ],
)
def test_the_caches_premise_is_checked_per_pipeline(family, backend, used):
    """Where a piece between added tokens encodes otherwise than alone, the cache is off (and says
    why); where it does not, it is on; either way conversations encode as HF."""
    from tokbackend.equivalence.families import build_family

    hf = build_family(family, "small")
    fast = tokbackend.accelerate(hf, backend, segment_cache_steps_aside=False)
    stats = fast.tokbackend.stats()["segment_cache"]
    assert stats["enabled"] is used, stats
    if not used:
        assert "not encoded independently" in stats["unsupported"]
    cuts = _added(hf)
    mismatch = find_mismatch(
        turn_by_turn(hf.encode, cuts), turn_by_turn(fast.encode, cuts), conversations(cuts, []), "conversations", _ci()
    )
    assert mismatch is None, mismatch.report()


def test_a_splitter_that_breaks_the_premise_turns_the_cache_off(fresh_pair, monkeypatch):
    """The build-time check catches a defective splitter before it serves (the conversations
    harness catches it too, `test_the_harness_finds_a_planted_split_defect`)."""
    from tokbackend import _segments as segments

    hf, _ = fresh_pair
    monkeypatch.setattr(
        segments.AddedTokenSplitter,
        "for_tokenizer_json",
        classmethod(
            lambda cls, text: OffByOne({str(token): token_id for token_id, token in hf.added_tokens_decoder.items()})
        ),
    )
    fast = tokbackend.accelerate(hf, "gigatoken")
    assert not fast.tokbackend.stats()["segment_cache"]["enabled"]
    text = "<|im_start|>user\nhello<|im_end|>\n"
    assert fast.encode(text) == hf.encode(text)
