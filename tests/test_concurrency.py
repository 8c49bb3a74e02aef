"""Threads and child processes: concurrent calls, renewals under load, fork/spawn/forkserver
children, forks while another thread holds a lock, and calls during a rebuild."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import queue as queue_module
import subprocess
import sys
import threading
from array import array

import pytest
from conftest import MIXED_TEXTS, held_by_another_thread, renewals_finished

import tokbackend
from tokbackend._tokenizer import AcceleratedTokenizerMixin, reference_of
from tokbackend.equivalence.corpus import prompt_text

# -- threads ----------------------------------------------------------------------------------


def _run_to_completion(worker, count: int, timeout: float) -> None:
    """Run `worker(offset)` on `count` threads; fail if any is still running after `timeout`."""
    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    assert not any(thread.is_alive() for thread in threads), "a worker is still running: deadlock or stall"


def _all_exact_from_eight_threads(exact, calls: int, timeout: float) -> None:
    """8 threads, released together, each making `calls` calls `exact(offset, call) -> bool`;
    any False, or any error (Rust panics included), fails the test."""
    errors: list[BaseException] = []
    wrong: list[tuple[int, int]] = []
    start = threading.Barrier(8)

    def worker(offset: int) -> None:
        start.wait()
        try:
            for call in range(calls):
                if not exact(offset, call):
                    wrong.append((offset, call))
        except BaseException as error:  # noqa: BLE001 - any error fails the test
            errors.append(error)

    _run_to_completion(worker, 8, timeout)
    assert not errors, errors[:3]
    assert not wrong, wrong[:5]


def test_concurrent_single_and_batch_calls_are_exact(hf_tokenizer, fast_tokenizer):
    expected = [hf_tokenizer.encode(text) for text in MIXED_TEXTS]
    backend_errors_before = fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0)

    def exact(offset: int, call: int) -> bool:
        index = (offset + call) % len(MIXED_TEXTS)
        if call % 2:
            return fast_tokenizer.encode(MIXED_TEXTS[index]) == expected[index]
        return fast_tokenizer(MIXED_TEXTS[index : index + 4])["input_ids"] == expected[index : index + 4]

    _all_exact_from_eight_threads(exact, calls=40, timeout=120)
    assert fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0) == backend_errors_before


def test_array_and_list_calls_from_eight_threads_are_exact(hf_tokenizer, fast_tokenizer):
    """Ids as `array('q')` (SGLang's form, a path of its own into the backend) and lists, single
    and batch, from 8 threads at once: exact, and no call fails inside the backend (gigatoken's
    single-document call, for one, cannot be entered while another thread's batch call runs)."""
    expected = [hf_tokenizer.encode(text) for text in MIXED_TEXTS]
    backend_errors_before = fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0)

    def exact(offset: int, call: int) -> bool:
        index = (offset + call) % len(MIXED_TEXTS)
        with tokbackend.ids_as_arrays() if offset % 2 else contextlib.nullcontext():
            if call % 2:
                return list(fast_tokenizer.encode(MIXED_TEXTS[index])) == expected[index]
            rows = fast_tokenizer(MIXED_TEXTS[index : index + 3])["input_ids"]
            return [list(row) for row in rows] == expected[index : index + 3]

    _all_exact_from_eight_threads(exact, calls=60, timeout=120)
    assert fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0) == backend_errors_before


def test_the_thread_check_fails_on_an_array_path_that_cannot_be_entered_twice(hf_tokenizer, monkeypatch):
    """The planted defect: gigatoken's array form through the library's single-document call,
    which borrows the tokenizer mutably; the check above must see its failures."""
    from tokbackend.backends._gigatoken import GigatokenBackend

    monkeypatch.setattr(GigatokenBackend, "encode_array", lambda self, text: array("q", self._rust.encode(text)))
    fast = tokbackend.accelerate(hf_tokenizer, "gigatoken")
    with pytest.raises(AssertionError):
        test_array_and_list_calls_from_eight_threads_are_exact(hf_tokenizer, fast)
    assert fast.tokbackend.stats()["fallbacks"].get("backend_error", 0) > 0


@pytest.mark.slow  # eight threads through repeated renewals; a call across a rebuild stays in CI
def test_ids_stay_exact_across_cache_renewals_under_eight_threads(hf_tokenizer):
    """A tiny cache budget makes the backend swap tokenizers while 8 threads encode. Renewal is
    triggered by resident memory growing during the backend's calls, so the test makes that growth
    certain whatever ran before it in this worker: random words (every pretoken new to
    gigatoken's cache) besides prose, no segment cache in front, and freed memory handed back
    to the OS first (else the caches can fill pages already resident, and nothing grows)."""
    import random

    from tokbackend.backends._renewal import release_freed_memory

    fast = tokbackend.accelerate(hf_tokenizer, "gigatoken", cache_budget_mib=16, segment_cache_mib=None)
    texts = [prompt_text(seed, 6000, "prose") for seed in range(100, 120)]
    rng = random.Random(7)

    def words() -> str:
        return " ".join("".join(rng.choices("abcdefghijklmnopqrstuvwxyz", k=rng.randint(2, 9))) for _ in range(900))

    texts += [words() for _ in range(20)]
    expected = [hf_tokenizer.encode(text) for text in texts]
    release_freed_memory()

    def exact(offset: int, call: int) -> bool:
        index = (offset * 5 + call) % len(texts)
        if call % 3 == 0:
            return fast(texts[index : index + 3])["input_ids"] == expected[index : index + 3]
        return fast.encode(texts[index]) == expected[index]

    _all_exact_from_eight_threads(exact, calls=30, timeout=300)
    renewals_finished()  # a renewal's fresh instance is built on a thread of its own
    stats = fast.tokbackend.stats()
    assert stats["cache_renewals"] >= 1, "no renewal happened: the test proves nothing"
    assert stats["fast_texts"] > 0


# -- child processes --------------------------------------------------------------------------


def _child_encode(tokenizer, texts, queue) -> None:
    stats_before = tokenizer.tokbackend.stats()["fast_texts"]
    single = [tokenizer.encode(text) for text in texts]
    batch = tokenizer(texts)["input_ids"]
    queue.put(
        {
            "single": single,
            "batch": batch,
            "accelerated": isinstance(tokenizer, AcceleratedTokenizerMixin) and tokenizer.tokbackend.fast_path_enabled,
            "fast_texts": tokenizer.tokbackend.stats()["fast_texts"] - stats_before,
        }
    )


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_child_processes_get_a_working_exact_accelerated_tokenizer(hf_tokenizer, fast_tokenizer, method):
    fast_tokenizer(MIXED_TEXTS)  # the parent has used the batch thread pool before the fork
    expected = [hf_tokenizer.encode(text) for text in MIXED_TEXTS]
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    child = context.Process(target=_child_encode, args=(fast_tokenizer, MIXED_TEXTS, queue))
    child.start()
    result = queue.get(timeout=240)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert result["single"] == expected
    assert result["batch"] == expected
    assert result["accelerated"]
    assert result["fast_texts"] >= 2 * len(MIXED_TEXTS) - 2  # all but the guarded text, twice


def _add_a_token_and_encode(tokenizer, queue) -> None:
    tokenizer.add_tokens(["<forked_child_token>"])  # the next encode rebuilds the lanes
    text = "before <forked_child_token> after"
    queue.put(
        (tokenizer.encode(text), reference_of(tokenizer).hf_ids([text])[0], tokenizer.tokbackend.fast_path_enabled)
    )


def test_a_child_forked_while_another_thread_rebuilds_can_rebuild(fresh_pair):
    """A thread rebuilding the lanes (seconds: build, guard, probe) holds the state's rebuild lock
    when a server forks. The child has no such thread, so the lock must not stay held there: its
    first rebuild (tokens added) would wait forever."""
    _, fast_tokenizer = fresh_pair
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_add_a_token_and_encode, args=(fast_tokenizer, queue))
    try:
        with held_by_another_thread(fast_tokenizer.tokbackend._rebuild_lock):
            child.start()
            try:
                ids, hf_ids, fast = queue.get(timeout=90)
            except queue_module.Empty:
                pytest.fail("the forked child hung on its rebuild: the rebuild lock stayed held in it")
    finally:
        child.join(timeout=30)
        if child.exitcode is None:
            child.kill()
    assert ids == hf_ids and fast


def _hand_over_and_encode(tokenizer, queue) -> None:
    text = "before \u017f after " * 50
    cut = tokenizer(text, truncation=True, max_length=8)["input_ids"]  # HF answers: it cuts
    queue.put((cut, reference_of(tokenizer).hf_ids([text])[0], tokenizer.encode(text)))


def test_a_child_forked_while_another_thread_is_inside_hfs_call_can_call_hf(fresh_pair):
    """A thread inside an HF call holds the Rust tokenizer's settings gate when a server forks;
    the child has no such thread, so the gate must be open there (its HF calls and internal
    hand-overs would wait forever)."""
    hf, fast_tokenizer = fresh_pair
    text = "before \u017f after " * 50
    expected = (
        hf(text, truncation=True, max_length=8)["input_ids"],
        hf.encode(text, add_special_tokens=False),
        hf.encode(text),
    )
    inside = fast_tokenizer._tokbackend_gate.entered(fast_tokenizer._tokenizer, ("held by a test",), internal=False)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_hand_over_and_encode, args=(fast_tokenizer, queue))
    try:
        with held_by_another_thread(inside):
            child.start()
            try:
                got = queue.get(timeout=90)
            except queue_module.Empty:
                pytest.fail("the forked child hung on an HF call: the settings gate stayed held in it")
    finally:
        child.join(timeout=30)
        if child.exitcode is None:
            child.kill()
    assert got == expected


def _own_resident_bytes(queue) -> None:
    from tokbackend.backends._renewal import resident_bytes

    held = b"\x01" * (256 << 20)  # written, so resident: the child is 256 MiB larger than its parent
    with open("/proc/self/statm") as statm:  # opened here, so the child's own
        fresh = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    queue.put((resident_bytes(), fresh, len(held)))


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc")
def test_a_forked_child_measures_its_own_memory_for_the_renewal_budget():
    """The renewal budget reads resident memory through a kept /proc/self/statm descriptor, which
    names the process that opened it: a forked child must not go on reading its parent's (a
    memory bound that never sees the child's growth). The fork hook drops the parent's."""
    from tokbackend.backends._renewal import resident_bytes

    assert resident_bytes() is not None  # the descriptor is open in the parent at the fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_own_resident_bytes, args=(queue,))
    child.start()
    try:
        measured, fresh, held = queue.get(timeout=90)
    finally:
        child.join(timeout=30)
    assert abs(measured - fresh) < held // 4, f"the child read {measured >> 20} MiB, its own statm {fresh >> 20} MiB"


# -- calls during a rebuild --------------------------------------------------------------------


def test_a_call_that_started_before_a_rebuild_finishes_on_the_build_it_started_with(fresh_pair, monkeypatch):
    """A call reads the build once. Here one has read it and is held inside the segment cache when
    tokens are added and another thread starts the rebuild (slowed in the splitter's
    construction). The call must finish on its own build's splitter, cache and routing. (The
    shape before builds were immutable reset the splitter to None at the start of a rebuild; a
    call there failed with AttributeError, counted as backend_error with a WARNING.)"""
    from tokbackend._segments import AddedTokenSplitter, SegmentCache

    hf, _ = fresh_pair
    fast = tokbackend.accelerate(hf, "gigatoken", segment_cache_steps_aside=False)
    text = "<|im_start|>user\nsent before the rebuild<|im_end|>\n"
    expected = hf.encode(text)
    in_call, rebuilding, call_done = threading.Event(), threading.Event(), threading.Event()
    waited_out: list[bool] = []
    consulted, for_tokenizer_json = SegmentCache.consulted, AddedTokenSplitter.for_tokenizer_json.__func__

    def held_consulted(self, texts):
        if threading.current_thread().name == "caller":
            in_call.set()
            assert rebuilding.wait(30)
        return consulted(self, texts)

    def held_for_tokenizer_json(cls, tokenizer_json):
        rebuilding.set()
        # the new build stays half made until the caller's call has ended on its own build (a call
        # that waited for the rebuild would not end: the wait times out and the test fails)
        if not call_done.wait(30):
            waited_out.append(True)
        return for_tokenizer_json(cls, tokenizer_json)

    monkeypatch.setattr(SegmentCache, "consulted", held_consulted)
    monkeypatch.setattr(AddedTokenSplitter, "for_tokenizer_json", classmethod(held_for_tokenizer_json))
    results: dict[str, list[int]] = {}

    def call() -> None:
        try:
            results.update(ids=fast.encode(text))
        finally:
            call_done.set()

    caller = threading.Thread(target=call, name="caller")
    caller.start()
    assert in_call.wait(30)
    fast.add_tokens(["<added_during_the_call>"])
    rebuilder = threading.Thread(target=lambda: results.update(after=fast.encode("x <added_during_the_call> y")))
    rebuilder.start()
    caller.join(60)
    rebuilder.join(60)
    assert not waited_out, "the call waited for the rebuild"
    assert results["ids"] == expected
    assert results["after"] == hf.encode("x <added_during_the_call> y")
    assert "backend_error" not in fast.tokbackend.stats()["fallbacks"]


# -- the background imports of `import tokbackend` -------------------------------------------

_FORK_MID_IMPORT = """
import os, signal, sys, time
import tokbackend
tokbackend.preload()
deadline = time.monotonic() + 30
while "awkward" not in sys.modules and time.monotonic() < deadline:
    time.sleep(0.0005)
assert "awkward" in sys.modules  # its import is under way (0.1-0.3 s) on the background thread
pid = os.fork()
if pid == 0:
    import awkward  # a module lock the parent's import thread held would hang here
    from tokbackend.backends import backend_class
    kind = backend_class("gigatoken")
    ids = kind(tokbackend.load_hf("qwen3").backend_tokenizer.to_str()).encode_batch(["a b", "c"])
    os._exit(0 if ids and all(ids) else 3)
until = time.monotonic() + 60
while time.monotonic() < until:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        sys.exit(os.waitstatus_to_exitcode(status))
    time.sleep(0.05)
os.kill(pid, signal.SIGKILL)
sys.exit("the child hung")
"""


def test_a_fork_while_the_backends_libraries_import_in_the_background_leaves_the_child_working():
    """A fork waits for the background imports: a child forked mid-import would find that
    module's import lock held by a thread it does not have, and hang on its first import."""
    done = subprocess.run([sys.executable, "-c", _FORK_MID_IMPORT], timeout=180, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_import_tokbackend_starts_no_thread_and_imports_no_backend_library():
    check = (
        "import sys, threading; import tokbackend; "
        "print([thread.name for thread in threading.enumerate()], 'awkward' in sys.modules, 'fastokens' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", check], timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['MainThread'] False False"


@pytest.mark.parametrize("setting", ["1", "0"])
def test_preload_imports_the_backends_libraries_in_the_background_unless_turned_off(setting):
    check = (
        "import sys, time; import tokbackend; tokbackend.preload(); from tokbackend._process import preload; "
        "assert preload.wait(60); "
        "print(all(name in sys.modules for name in ('awkward', 'tokbackend._guard.derive', "
        "'tokbackend._routing.auto')))"
    )
    environment = {**os.environ, "TOKBACKEND_PRELOAD": setting}
    done = subprocess.run([sys.executable, "-c", check], env=environment, timeout=120, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ("True" if setting == "1" else "False")
