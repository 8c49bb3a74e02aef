"""Threads, child processes, memory, the Unicode guard on the encode path, the boot probe."""

from __future__ import annotations

import json
import multiprocessing
import queue as queue_module
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from conftest import held_by_another_thread

import tokbackend
from equivalence.corpus import prompt_text
from tokbackend.tokenizer import AcceleratedTokenizerMixin

HELPERS = Path(__file__).parent / "helpers"
TEXTS = [prompt_text(seed, 3000, kind) for seed in range(6) for kind in ("code", "prose", "mixed")] + [
    "<|im_start|>user\n<think>x</think><|im_end|>",
    "e\u0301 \U0001f468\u200d\U0001f469 1\ufe0f\u20e3",
    "a\u0300\u0300\u1ae6 guarded \u017f's text",  # code points the guards of gigatoken and fastokens route to HF
]


# -- 1. threads ------------------------------------------------------------------------------


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
    expected = [hf_tokenizer.encode(text) for text in TEXTS]
    backend_errors_before = fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0)

    def exact(offset: int, call: int) -> bool:
        index = (offset + call) % len(TEXTS)
        if call % 2:
            return fast_tokenizer.encode(TEXTS[index]) == expected[index]
        return fast_tokenizer(TEXTS[index : index + 4])["input_ids"] == expected[index : index + 4]

    _all_exact_from_eight_threads(exact, calls=40, timeout=120)
    assert fast_tokenizer.tokbackend.stats()["fallbacks"].get("backend_error", 0) == backend_errors_before


def test_ids_stay_exact_across_cache_renewals_under_eight_threads(hf_tokenizer):
    """A tiny cache budget makes the backend swap tokenizers while 8 threads encode."""
    fast = tokbackend.accelerate(hf_tokenizer, "gigatoken", cache_budget_mib=4)
    texts = [prompt_text(seed, 6000, "prose") for seed in range(100, 140)]
    expected = [hf_tokenizer.encode(text) for text in texts]

    def exact(offset: int, call: int) -> bool:
        index = (offset * 5 + call) % len(texts)
        if call % 3 == 0:
            return fast(texts[index : index + 3])["input_ids"] == expected[index : index + 3]
        return fast.encode(texts[index]) == expected[index]

    _all_exact_from_eight_threads(exact, calls=30, timeout=300)
    stats = fast.tokbackend.stats()
    assert stats["cache_renewals"] >= 1, "no renewal happened: the test proves nothing"
    assert stats["fast_texts"] > 0


def test_raw_gigatoken_single_encode_is_not_thread_safe(hf_tokenizer):
    """Why every call goes through gigatoken's batch entry point."""
    import gigatoken

    raw = gigatoken.Tokenizer.from_json(hf_tokenizer.backend_tokenizer.to_str())
    errors: list[str] = []

    def worker() -> None:
        for _ in range(30):
            try:
                raw.encode(TEXTS[0] * 20)
                raw.encode_batch_list(TEXTS[:4])
            except RuntimeError as error:
                errors.append(str(error))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert any("Already borrowed" in error for error in errors)


# -- 2. fork, spawn, deepcopy, pickle --------------------------------------------------------


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
    fast_tokenizer(TEXTS)  # the parent has used the batch thread pool before the fork
    expected = [hf_tokenizer.encode(text) for text in TEXTS]
    context = multiprocessing.get_context(method)
    queue = context.Queue()
    child = context.Process(target=_child_encode, args=(fast_tokenizer, TEXTS, queue))
    child.start()
    result = queue.get(timeout=240)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert result["single"] == expected
    assert result["batch"] == expected
    assert result["accelerated"]
    assert result["fast_texts"] >= 2 * len(TEXTS) - 2  # all but the guarded text, twice


def _add_a_token_and_encode(tokenizer, queue) -> None:
    tokenizer.add_tokens(["<forked_child_token>"])  # the next encode rebuilds the lanes
    text = "before <forked_child_token> after"
    queue.put((tokenizer.encode(text), tokenizer._hf_ids([text])[0], tokenizer.tokbackend.fast_path_enabled))


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


# -- 3. bounded memory -----------------------------------------------------------------------


def _growth(mode: str, budget_mib: int, prompts: int) -> dict:
    completed = subprocess.run(
        [sys.executable, str(HELPERS / "memory_growth.py"), mode, str(budget_mib), str(prompts)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def test_cache_memory_stays_within_the_budget_where_raw_gigatoken_does_not():
    budget_mib = 128
    raw = _growth("raw", budget_mib, 2000)
    accelerated = _growth("accelerated", budget_mib, 2000)
    assert raw["growth_mib"] > budget_mib, f"raw gigatoken grew only {raw['growth_mib']:.0f} MiB: the test proves nothing"
    assert accelerated["growth_mib"] < budget_mib, accelerated
    assert accelerated["renewals"] >= 1


# -- 4. the Unicode guard ----------------------------------------------------------------------


def test_guarded_text_is_exact_and_counted(hf_tokenizer, fast_tokenizer):
    text = TEXTS[-1]
    assert fast_tokenizer.tokbackend.guard.needs_hf(text)
    before = fast_tokenizer.tokbackend.stats()["fallbacks"].get("unicode_guard", 0)
    assert fast_tokenizer(TEXTS)["input_ids"] == [hf_tokenizer.encode(t) for t in TEXTS]
    assert fast_tokenizer.tokbackend.stats()["fallbacks"]["unicode_guard"] == before + 1


def test_guard_is_cheap_to_skip_for_ascii_and_flags_only_divergent_code_points(fast_tokenizer):
    guard = fast_tokenizer.tokbackend.guard
    assert not guard.needs_hf(prompt_text(1, 50_000, "code").encode("ascii", "ignore").decode())
    assert not guard.needs_hf(prompt_text(1, 50_000, "prose"))
    for code_point in sorted(guard.code_points)[:20]:
        assert guard.needs_hf("plain text " + chr(code_point) + " more")


# -- 5. the boot probe -------------------------------------------------------------------------


def test_boot_probe_is_within_budget(fast_tokenizer):
    assert 0 < fast_tokenizer.tokbackend.probe_seconds < 0.05
