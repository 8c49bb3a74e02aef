"""An early start (`early_start`, on by default): `accelerate()` returns as soon as an exact build
can serve, and what is left (the exact guard of a pipeline without a record, auto's preferred
backend) is finished on a background thread and swapped in. Exact throughout: a provisional
guard covers every code point the derivation can find, the finished lane is probed again, and
the swap is one assignment.
"""

from __future__ import annotations

import concurrent.futures
import copy
import logging
import multiprocessing
import os
import threading
import time

import pytest
from defects import DropsOnCombiningAcute, finish_without_package_data

import tokbackend
from equivalence.families import build_family
from tokbackend import build as build_module
from tokbackend import guard as guard_module
from tokbackend import successors as successors_module
from tokbackend.backends import backend_class
from tokbackend.guard import ProvisionalGuard, derive, records
from tokbackend.guard.candidates import candidate_runs, run_around, sample
from tokbackend.guard.derive import FULL_PLANES, FastDerivation, _hf_encoder
from tokbackend.guard.records import record_key
from tokbackend.guard.scan import from_ranges

TEXTS = [
    "Ready? 毕老师说：naïve café, Привет, 🤖 1234",  # non-ASCII that no provisional guard holds
    "e\u0301 A\u030a combining marks, ſ's case relatives",  # what a provisional guard sends to HF
    "<|im_start|>user\nhi 12345<|im_end|>",
]


@pytest.fixture
def unseen_pipeline(monkeypatch, tmp_path):
    """No shipped record and an empty cache: every pipeline is one tokbackend has not seen."""
    monkeypatch.setattr(records, "SHIPPED_RECORDS", tmp_path / "no-shipped-records")
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


@pytest.fixture(scope="module")
def qwen3():
    return tokbackend.load_hf("qwen3")


@pytest.mark.parametrize("backend", ["gigatoken", "fastokens"])
def test_an_unseen_pipeline_serves_at_once_under_a_guard_that_covers_the_exact_one(qwen3, unseen_pipeline, backend):
    fast = tokbackend.accelerate(qwen3, backend)
    provisional = fast.tokbackend.guard
    assert isinstance(provisional, ProvisionalGuard) and "provisional" in fast.tokbackend.stats()["guard"]
    assert not provisional.needs_hf(TEXTS[0]) and provisional.needs_hf(TEXTS[1])
    for text in TEXTS:
        assert fast.encode(text) == qwen3.encode(text)
    assert fast.tokbackend.stats()["fast_texts"] == 2  # the first and the last: the backend answered
    assert fast.tokbackend.stats()["start_up"]["phase"] == "early"
    assert fast.tokbackend.wait_until_final(120)
    assert fast.tokbackend.stats()["start_up"]["phase"] == "final"
    exact = fast.tokbackend.guard
    assert not isinstance(exact, ProvisionalGuard) and exact.record["matched"] == "derived here"
    assert exact.code_points <= provisional.code_points
    assert len(exact.code_points) < len(provisional.code_points)
    for text in TEXTS:
        assert fast.encode(text) == qwen3.encode(text)


def uncovered(tokenizer_json: str, backend: str) -> frozenset[int]:
    """What the fast derivation finds (ASCII aside, which no guard holds) outside its own
    provisional bound: what an early start would have served from the backend unguarded."""
    kind = backend_class(backend)
    derivation = FastDerivation(tokenizer_json, lambda text: kind(text, kind.options_for_scanning()))
    record = derivation.record(backend, record_key(tokenizer_json, kind.guard_family), {})
    return frozenset(point for point in from_ranges(record["code_points"]) if point >= 0x80) - derivation.bound()


# In CI one family per kind of pipeline (NFC + one Split, a Sequence of Splits, GPT-2's bare
# ByteLevel, Tekken's, SentencePiece-style Metaspace through the ids oracle); all with -m slow.
CI_FAMILIES = ("qwen3.5", "deepseek-v3", "gpt2", "tekken", "llama2-legacy")
ALL_FAMILIES = (
    "qwen3",
    "qwen3.5",
    "llama3",
    "gpt-oss",
    "cl100k",
    "deepseek-v3",
    "kimi-k2",
    "tekken",
    "gpt2",
    "modernbert",
    "gemma3",
    "llama2-legacy",
    "mistral-metaspace",
)


@pytest.mark.parametrize(
    "family",
    [pytest.param(name, marks=() if name in CI_FAMILIES else pytest.mark.slow) for name in ALL_FAMILIES],
)
@pytest.mark.parametrize("backend", ["gigatoken", "fastokens"])
def test_the_provisional_bound_covers_what_the_derivation_finds(family, backend):
    tokenizer_json = build_family(family, "small").backend_tokenizer.to_str()
    try:
        backend_class(backend)(tokenizer_json, backend_class(backend).options_for_scanning())
    except tokbackend.BackendUnavailableError:
        pytest.skip(f"{backend} cannot load the {family} pipeline (auto serves it with the other backend)")
    assert uncovered(tokenizer_json, backend) == frozenset()


def test_a_bound_that_misses_a_class_is_caught_and_reported(qwen3, unseen_pipeline, monkeypatch, caplog):
    """Planted: a bound without the candidate runs (every class the derivation scans). The
    coverage check above fails on it, and the swap to the exact guard says so loudly."""
    tokenizer_json = qwen3.backend_tokenizer.to_str()
    monkeypatch.setattr(FastDerivation, "bound", lambda self: frozenset())
    assert uncovered(tokenizer_json, "gigatoken")
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        fast = tokbackend.accelerate(qwen3, "gigatoken")
        assert fast.tokbackend.wait_until_final(120)
    assert any("its provisional guard did not" in record.getMessage() for record in caplog.records)


def test_a_derivation_that_misses_a_class_is_caught_by_the_second_probe(
    qwen3, unseen_pipeline, monkeypatch, register_for_test, caplog
):
    """Planted: a backend wrong on texts with a combining mark, and a derivation that finds
    nothing. Under the provisional guard those texts go to HF and the probe skips them; the
    finished lane's probe sees them, so the fast path goes off instead of serving them wrong."""
    register_for_test("drops-on-combining-acute", DropsOnCombiningAcute)
    # a scan of a few code points, U+0301 among them (a scan of every candidate against this
    # backend would re-check every string it gets wrong, for minutes)
    monkeypatch.setattr(guard_module, "DERIVATION_CODE_POINTS", [0x301, *range(0x4E00, 0x4E3F)])
    derived = FastDerivation.record
    monkeypatch.setattr(FastDerivation, "record", lambda self, *args: {**derived(self, *args), "code_points": [], "found_by": {}})
    fast = tokbackend.accelerate(qwen3, "drops-on-combining-acute")
    assert fast.tokbackend.fast_path_enabled
    assert fast.encode(TEXTS[1]) == qwen3.encode(TEXTS[1])  # the provisional guard sent it to HF
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        assert fast.tokbackend.wait_until_final(120)
    assert not fast.tokbackend.fast_path_enabled and "disagrees with HuggingFace" in fast.tokbackend.disabled_reason
    assert fast.tokbackend.stats()["start_up"]["failed"] == fast.tokbackend.disabled_reason
    assert any("finishing the start-up build" in record.getMessage() for record in caplog.records)
    assert fast.encode(TEXTS[1]) == qwen3.encode(TEXTS[1])


def test_strict_starts_are_never_early(qwen3, unseen_pipeline):
    fast = tokbackend.accelerate(qwen3, "auto", strict=True)
    assert fast.tokbackend.build.final and not isinstance(fast.tokbackend.guard, ProvisionalGuard)


def test_copies_made_during_an_early_start_finish_on_one_shared_build(qwen3, unseen_pipeline):
    fast = tokbackend.accelerate(qwen3, "auto")
    assert not fast.tokbackend.build.final
    clone = copy.deepcopy(fast)
    for tokenizer in (fast, clone):
        assert tokenizer.tokbackend.wait_until_final(120)
        assert tokenizer.encode(TEXTS[0]) == qwen3.encode(TEXTS[0])
    assert clone.tokbackend.routing.lane.backend is fast.tokbackend.routing.lane.backend
    assert fast.tokbackend.routing.lane.name == "fastokens"


def _in_child(fast, queue):
    queue.put((fast.encode(TEXTS[0]), fast.tokbackend.wait_until_final(120), fast.tokbackend.routing.lane.name))


def test_a_child_forked_during_an_early_start_finishes_it_itself(qwen3, unseen_pipeline):
    fast = tokbackend.accelerate(qwen3, "auto")
    assert not fast.tokbackend.build.final
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_in_child, args=(fast, queue))
    child.start()
    ids, final, name = queue.get(timeout=180)
    child.join(30)
    assert child.exitcode == 0
    assert ids == qwen3.encode(TEXTS[0]) and final and name == "fastokens"
    assert fast.tokbackend.wait_until_final(120)


def _counting_upgraded(monkeypatch) -> list:
    """`upgraded` counted: the builds it was asked to finish (other tests' leftovers among them)."""
    asked = []
    upgraded = build_module.upgraded
    monkeypatch.setattr(build_module, "upgraded", lambda build, *args: (asked.append(build), upgraded(build, *args))[1])
    return asked


def test_copies_share_one_successor_and_it_runs_once(qwen3, unseen_pipeline, monkeypatch):
    asked = _counting_upgraded(monkeypatch)
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    early = fast.tokbackend.build
    assert not early.final and isinstance(early.next, concurrent.futures.Future)
    clone, shallow = copy.deepcopy(fast), copy.copy(fast)
    assert clone.tokbackend.build is early and shallow.tokbackend.build is early
    for tokenizer in (clone, fast, shallow):
        assert tokenizer.encode(TEXTS[0]) == qwen3.encode(TEXTS[0])
        assert tokenizer.tokbackend.wait_until_final(120)
    assert [build for build in asked if build is early] == [early]  # once, whichever copy asked
    assert clone.tokbackend.build is fast.tokbackend.build is early.next.result()
    assert fast.tokbackend.build.next is None


def test_the_worker_swaps_the_final_build_in_where_no_call_comes(qwen3, unseen_pipeline):
    """A process that makes no more calls after accelerate() still shows the final build in
    stats(): the worker that finishes it swaps it into every state serving the build."""
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    clone = copy.deepcopy(fast)
    successor = fast.tokbackend.build.next
    assert successor is not None and concurrent.futures.wait([successor], 120).done
    deadline = time.monotonic() + 30
    while not all(tokenizer.tokbackend.stats()["start_up"]["final"] for tokenizer in (fast, clone)):
        assert time.monotonic() < deadline, "the finished build was not swapped in without a call"
        time.sleep(0.01)
    for tokenizer in (fast, clone):
        start_up = tokenizer.tokbackend.stats()["start_up"]
        assert start_up["finished_in_s"] is not None and start_up["failed"] is None
        assert tokenizer.tokbackend.build is successor.result()


def _in_child_mid_finish(fast, queue):
    final = fast.tokbackend.wait_until_final(90)
    queue.put((final, fast.encode(TEXTS[0]), fast.tokbackend.routing.lane.name, fast.tokbackend.stats()["start_up"]))


def test_a_child_forked_while_the_parent_finishes_the_build_gets_a_final_build_of_its_own(qwen3, unseen_pipeline, monkeypatch):
    """Planted: the parent's worker held inside `upgraded` while the child is forked. The worker
    thread stays in the parent; the child must finish the build itself rather than wait on a
    future that nothing there runs."""
    parent = os.getpid()
    inside, release = threading.Event(), threading.Event()
    asked_in = []
    upgraded = build_module.upgraded

    def held_in_the_parent(*args):
        asked_in.append(os.getpid())
        if os.getpid() == parent:
            inside.set()
            release.wait(120)
        return upgraded(*args)

    monkeypatch.setattr(build_module, "upgraded", held_in_the_parent)
    fast = tokbackend.accelerate(qwen3, "auto")
    assert not fast.tokbackend.build.final
    try:
        assert inside.wait(60), "the parent's worker did not start finishing the build"
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_in_child_mid_finish, args=(fast, queue))
        child.start()
        final, ids, name, start_up = queue.get(timeout=180)
        child.join(30)
    finally:
        release.set()
    assert child.exitcode == 0
    assert final and start_up["final"] and start_up["failed"] is None and name == "fastokens"
    assert ids == qwen3.encode(TEXTS[0])
    assert not fast.tokbackend.build.final or asked_in.count(parent) == 1  # the parent's is its own
    assert fast.tokbackend.wait_until_final(120) and fast.tokbackend.routing.lane.name == "fastokens"


def test_the_guard_module_derives_nothing_with_a_record(qwen3, monkeypatch):
    """With a shipped record there is nothing provisional: no derivation starts at all."""
    monkeypatch.setattr(guard_module.derive, "FastDerivation", lambda *args, **kwargs: pytest.fail("derived with a record"))
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    assert fast.tokbackend.build.final and "shipped" in fast.tokbackend.stats()["guard"]


@pytest.fixture
def failing_finish(monkeypatch):
    """Planted: the background work of an early start raises, as it did where a wheel lacked
    the package data every derivation reads (FileNotFoundError)."""
    finish_without_package_data(monkeypatch)


@pytest.mark.parametrize("backend", ["gigatoken", "auto"])
def test_a_failure_finishing_an_early_start_is_an_error_and_hf_serves(qwen3, unseen_pipeline, failing_finish, backend, caplog):
    """In-process users keep the early start; a failure after it is not served on with the
    early build (its guard was provisional): an ERROR, the reason in stats(), HF answers."""
    fast = tokbackend.accelerate(qwen3, backend)
    assert not fast.tokbackend.build.final and fast.tokbackend.stats()["start_up"]["failed"] is None
    assert fast.tokbackend.stats()["start_up"]["phase"] == "early"
    with caplog.at_level(logging.ERROR, logger="tokbackend"):
        assert fast.tokbackend.wait_until_final(120)
    failed = fast.tokbackend.stats()["start_up"]["failed"]
    assert failed is not None and "FileNotFoundError: planted" in failed
    assert fast.tokbackend.stats()["start_up"]["phase"] == "failed"
    assert not fast.tokbackend.fast_path_enabled and fast.tokbackend.disabled_reason == failed
    errors = [record.getMessage() for record in caplog.records if record.levelno == logging.ERROR]
    assert any("finishing the start-up build failed" in message and "HuggingFace" in message for message in errors), errors
    served = fast.tokbackend.stats()["fast_texts"]
    assert [fast.encode(text) for text in TEXTS] == [qwen3.encode(text) for text in TEXTS]
    assert fast.tokbackend.stats()["fast_texts"] == served  # every one of them went to HF


def _server_lines(caplog, model: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if f"tokenizer for {model}" in record.getMessage()]


def test_a_server_process_serves_with_the_final_build_and_says_so(qwen3, unseen_pipeline, caplog):
    """On a fresh replica the integration builds the final build (auto's choice, the derived
    record) before the process serves, with no bridge, and its one line names what serves."""
    from tokbackend.integrations.common import accelerate_for_server

    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        fast = accelerate_for_server(qwen3, "qwen3", "--tokenizer-backend tokbackend-auto", "SGLang")
    assert fast.tokbackend.build.final and fast.tokbackend.fast_path_enabled
    assert fast.tokbackend.routing.lane.name == "fastokens" and not fast.tokbackend.routing.lane.provisional
    (line,) = _server_lines(caplog, "qwen3")
    assert "(built in " in line and "backend auto (fastokens" in line and "derived here" in line
    assert "not built: gigatoken" in line and "served while it loaded" not in line  # no bridge


def test_a_second_load_in_a_server_process_shares_the_first_build(qwen3, unseen_pipeline, caplog):
    """SGLang's scheduler loads the tokenizer twice (for itself and its model worker): the second
    load serves with the first one's build rather than building it again on the way to /health,
    but only where the two encode alike: an added token, or other options, build anew."""
    from tokbackend.integrations.common import accelerate_for_server

    flag = "--tokenizer-backend tokbackend-auto"
    first = accelerate_for_server(qwen3, "qwen3", flag, "SGLang")
    second = accelerate_for_server(tokbackend.load_hf("qwen3"), "qwen3", flag, "SGLang")
    assert second is not first and second.tokbackend.build is first.tokbackend.build
    line = _server_lines(caplog, "qwen3")[-1]
    assert "the build of an earlier load in this process" in line
    text = "Ready? 毕老师说 naïve 🤖 1234 <think>x</think>"
    assert second.encode(text) == qwen3.encode(text) and second.tokbackend.stats()["fast_texts"] >= 1

    changed = tokbackend.load_hf("qwen3")
    changed.add_tokens(["<planted-tool>"])
    third = accelerate_for_server(changed, "qwen3", flag, "SGLang")
    assert third.tokbackend.build is not first.tokbackend.build
    assert third.encode("a<planted-tool>b") == changed.encode("a<planted-tool>b") != qwen3.encode("a<planted-tool>b")
    other = accelerate_for_server(tokbackend.load_hf("qwen3"), "qwen3", "--tokenizer-backend gigatoken", "SGLang")
    assert other.tokbackend.build is not first.tokbackend.build and other.tokbackend.routing.lane.name == "gigatoken"


def test_a_second_load_shares_nothing_where_the_vocabulary_differs(qwen3, unseen_pipeline):
    """Planted: a tokenizer whose pipeline and added tokens are the earlier one's, with two
    tokens' ids swapped in its vocabulary (what a build's content leaves out): built anew."""
    import json

    from tokenizers import Tokenizer

    from tokbackend.integrations.common import accelerate_for_server

    flag = "--tokenizer-backend tokbackend-fastokens"
    first = accelerate_for_server(qwen3, "qwen3", flag, "SGLang")
    data = json.loads(qwen3.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    vocab["hello"], vocab["world"] = vocab["world"], vocab["hello"]
    swapped = copy.copy(qwen3)
    swapped._tokenizer = Tokenizer.from_str(json.dumps(data))
    second = accelerate_for_server(swapped, "qwen3", flag, "SGLang")
    assert second.tokbackend.build is not first.tokbackend.build
    assert second.encode("hello world") == swapped.encode("hello world") != qwen3.encode("hello world")


def test_a_server_refuses_to_start_when_finishing_the_start_up_build_fails(qwen3, unseen_pipeline, failing_finish, monkeypatch):
    from tokbackend.integrations.common import ALLOW_FALLBACK_ENV, accelerate_for_server

    with pytest.raises(RuntimeError, match="building the fast path failed: FileNotFoundError: planted.*refusing to start"):
        accelerate_for_server(qwen3, "qwen3", "--tokenizer-backend tokbackend-auto", "SGLang")
    monkeypatch.setenv(ALLOW_FALLBACK_ENV, "1")  # the operator's choice: serve it with HF
    served = accelerate_for_server(qwen3, "qwen3", "--tokenizer-backend gigatoken", "SGLang")
    assert served is qwen3  # HF's own, logged as an ERROR


def test_the_screen_on_the_served_tokenizer_sees_what_its_own_instances_see(monkeypatch):
    """With the ids oracle (a SentencePiece-style pipeline) an early start screens the served
    tokenizer and backend instead of building its own. Planted: a served backend wrong on one
    sampled code point outside every candidate run; the bound must hold the run around it."""
    tokenizer_json = build_family("mistral-metaspace", "small").backend_tokenizer.to_str()
    kind = backend_class("gigatoken")
    backend = kind(tokenizer_json, kind.options_for_scanning())
    planted = next(point for point in sample(FULL_PLANES, candidate_runs(tokenizer_json)) if point > 0x4E00)
    built = []
    monkeypatch.setattr(derive, "_hf_encoder", lambda text: built.append(text) or _hf_encoder(text))

    def wrong(texts):
        return [ids[:-1] if chr(planted) in text else ids for text, ids in zip(texts, backend.encode_batch(texts))]

    def bound(candidate):
        served = (_hf_encoder(tokenizer_json), candidate)
        built.clear()
        derivation = FastDerivation(tokenizer_json, lambda text: pytest.fail("built an instance for the screen"), served=served)
        assert not built  # the screen used the served encoders
        return derivation.bound()

    first, last = run_around(planted)
    assert planted not in bound(backend.encode_batch)
    assert set(range(first, last + 1)) <= bound(wrong)


class HandClock:
    """The clock of the wait for a pause (`successors._now`, `successors._sleep`), moved by the test alone:
    what the wait decides depends on the calls and the patience, not on how loaded the machine is."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleepers = 0
        self.naps = 0  # sleep() calls so far
        self.changed = threading.Condition()

    def __call__(self) -> float:
        with self.changed:
            return self.now

    def sleep(self, seconds: float) -> None:
        with self.changed:
            until = self.now + seconds
            self.sleepers += 1
            self.naps += 1
            self.changed.notify_all()
            self.changed.wait_for(lambda: self.now >= until)
            self.sleepers -= 1

    def advance(self, seconds: float) -> None:
        with self.changed:
            self.now += seconds
            self.changed.notify_all()

    def advance_to_the_next_nap(self, seconds: float, timeout: float = 30.0) -> bool:
        """Move the clock, then wait until some sleeper has looked and gone back to sleep."""
        with self.changed:
            naps = self.naps
            self.now += seconds
            self.changed.notify_all()
            return self.changed.wait_for(lambda: self.naps > naps, timeout)

    def wait_for_a_sleeper(self) -> None:
        with self.changed:
            self.changed.wait_for(lambda: self.sleepers > 0)


@pytest.fixture
def hand_clock(monkeypatch):
    clock = HandClock()
    monkeypatch.setattr(successors_module, "_now", clock)
    monkeypatch.setattr(successors_module, "_sleep", clock.sleep)
    yield clock
    clock.advance(1e9)  # whatever still waits wakes, and finds the real clock back


def test_the_finishing_work_waits_for_a_pause_in_the_calls(qwen3, unseen_pipeline, monkeypatch, hand_clock):
    """The background work of an early start holds the GIL for long stretches, so it starts in
    a pause in the calls (the first requests are not made to wait), or after its patience."""
    monkeypatch.setattr(guard_module, "DERIVATION_CODE_POINTS", [0x301, *range(0x4E00, 0x4E3F)])  # a derivation of a second
    monkeypatch.setattr(successors_module, "UPGRADE_PAUSE_S", 2.0)
    monkeypatch.setattr(successors_module, "UPGRADE_PATIENCE_S", 60.0)

    def calls_for(tokenizer, seconds: float, apart: float) -> None:
        for _ in range(round(seconds / apart)):
            hand_clock.advance(apart)
            assert tokenizer.encode(TEXTS[0]) == qwen3.encode(TEXTS[0])

    fast = tokbackend.accelerate(qwen3, "gigatoken")
    calls_for(fast, 6.0, apart=0.5)
    hand_clock.wait_for_a_sleeper()  # the finishing work has looked at the calls, and waits on
    assert not fast.tokbackend.build.final  # no pause yet: nothing was started
    hand_clock.advance(2.0)  # the pause
    assert fast.tokbackend.wait_until_final(600)

    monkeypatch.setattr(successors_module, "UPGRADE_PATIENCE_S", 0.5)
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(unseen_pipeline / "another-fresh-cache"))
    again = tokbackend.accelerate(tokbackend.load_hf("qwen3"), "gigatoken")
    assert not again.tokbackend.build.final
    calls_for(again, 1.0, apart=0.1)  # never a pause; the last call leaves none either
    assert again.tokbackend.wait_until_final(600)  # out of patience: finished all the same


def test_a_long_call_in_flight_is_no_pause(qwen3, unseen_pipeline, monkeypatch, hand_clock):
    """A burst's batch runs for hundreds of milliseconds: the finishing work must not start 50 ms
    into it (it holds the GIL and doubled the first burst). Planted: a call that blocks inside
    the backend while the hand clock moves past the pause."""
    monkeypatch.setattr(successors_module, "UPGRADE_PAUSE_S", 2.0)
    monkeypatch.setattr(successors_module, "UPGRADE_PATIENCE_S", 60.0)
    started = []
    upgraded = build_module.upgraded
    monkeypatch.setattr(build_module, "upgraded", lambda *args: (started.append(True), upgraded(*args))[1])
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    assert not fast.tokbackend.build.final
    backend = fast.tokbackend.backend
    inside, release = threading.Event(), threading.Event()
    encode = backend.encode
    monkeypatch.setattr(backend, "encode", lambda text: (inside.set(), release.wait(60), encode(text))[2])
    call = threading.Thread(target=fast.encode, args=(TEXTS[0],))
    call.start()
    assert inside.wait(60)
    hand_clock.wait_for_a_sleeper()
    for _ in range(5):  # 10 s of the hand clock with the call in flight: the work waits on
        assert hand_clock.advance_to_the_next_nap(2.0), "the finishing work stopped waiting with a call in flight"
    assert not started and not fast.tokbackend.build.final
    release.set()
    call.join(60)
    hand_clock.advance(2.0)  # the pause after the call ended
    assert fast.tokbackend.wait_until_final(600) and started


# A process that exits right after accelerate(): the background work it started (a lane's
# warm-up and spare instance, an early start's finishing) stops between its steps rather than
# keeping the process alive for seconds. Planted: a warm-up of a second, and a pause of five
# before the finishing work, so that the exit comes first; what runs after it prints.
EXITS_AT_ONCE = """
import sys, time
import tokbackend
from tokbackend import build, successors
from tokbackend.backends.gigatoken import GigatokenBackend

warm_up = GigatokenBackend.prepare
GigatokenBackend.prepare = lambda self: (time.sleep(1.0), warm_up(self))[1]
successors.UPGRADE_PAUSE_S = successors.UPGRADE_PATIENCE_S = 5.0
upgraded = build.upgraded
build.upgraded = lambda *args: (print("FINISHED THE START-UP BUILD", flush=True), upgraded(*args))[1]
fast = tokbackend.accelerate(tokbackend.load_hf("qwen3"), sys.argv[1])
backend = fast.tokbackend.backend
if hasattr(backend, "_build"):  # a RenewingBackend: say when its spare is built
    spare = backend._build
    backend._build = lambda: (print("BUILT A SPARE", flush=True), spare())[1]
print("SERVES", fast.tokbackend.build.final, fast.encode("Hello"), flush=True)
"""


@pytest.mark.parametrize("backend", ["gigatoken", "auto"])
def test_a_process_that_exits_stops_the_background_work_it_no_longer_needs(backend, unseen_pipeline):
    import os
    import subprocess
    import sys

    environment = {**os.environ, "TOKBACKEND_CACHE_DIR": str(unseen_pipeline / "cache")}
    completed = subprocess.run(
        [sys.executable, "-c", EXITS_AT_ONCE, backend], capture_output=True, text=True, timeout=300, env=environment, check=False
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # gigatoken: a shipped record, final at once (its warm-up and spare follow); auto: the
    # bridge serves while fastokens would load
    assert f"SERVES {backend == 'gigatoken'} [9707]" in completed.stdout, completed.stdout
    assert "BUILT A SPARE" not in completed.stdout
    assert "FINISHED THE START-UP BUILD" not in completed.stdout


def test_a_step_the_lifecycle_table_does_not_allow_is_refused(qwen3, unseen_pipeline):
    """`_swap` is the one place a build is swapped in, and it holds to `PHASES`: planted, an
    early build put back over the final one it became (a finishing that ran twice) is refused,
    and the final build serves on."""
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    early = fast.tokbackend.build
    assert early.phase.value == "early" and fast.tokbackend.wait_until_final(120)
    final = fast.tokbackend.build
    state = fast.tokbackend
    with pytest.raises(RuntimeError, match="phase 'final' cannot be replaced by one in phase 'early'"):
        with state._rebuild_lock:
            state._swap(early, state.serving[1])
    assert state.build is final and fast.encode(TEXTS[1]) == qwen3.encode(TEXTS[1])
