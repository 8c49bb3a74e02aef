"""The Prometheus metrics (docs/metrics.md), read from prometheus_client's real registry: in this
process, summed over processes in multiprocess mode, and absent without prometheus_client."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import prometheus_client  # the test extra's: these tests fail, not skip, without it
import pytest
from conftest import fresh_qwen3
from prometheus_client import multiprocess

import tokbackend
from tokbackend.backends import BackendUnavailableError
from tokbackend.backends._gigatoken import GigatokenBackend

GUARDED = "a\u0300\u0300\u1ae6 guarded \u017f's text"  # code points both backends' guards hand to HF


@pytest.fixture(scope="module")
def accelerated():
    return tokbackend.accelerate(fresh_qwen3(), "fastokens")


def sample(name: str, **labels: str) -> float:
    return prometheus_client.REGISTRY.get_sample_value(name, labels) or 0.0


def samples() -> dict[str, float]:
    """The values a test reads: texts by path and reason, and encode calls timed by path."""
    return {
        "fast": sample("tokbackend_fast_texts_total"),
        **{
            reason: sample("tokbackend_fallback_texts_total", reason=reason)
            for reason in ("text_pair", "return_tensors", "unicode_guard", "padding")
        },
        "fast calls": sample("tokbackend_encode_seconds_count", path="fast"),
        "hf calls": sample("tokbackend_encode_seconds_count", path="hf"),
    }


def moved(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {key: after[key] - before[key] for key in before if after[key] != before[key]}


def test_each_counter_moves_by_the_texts_answered_or_handed_over_and_each_call_is_timed_once(accelerated):
    before, stats_before = samples(), accelerated.tokbackend.stats()
    accelerated.encode("hello world")  # the backend: one text, one call
    accelerated(["one", "two", "three"])  # the backend: three texts, one call
    accelerated("a question", "its pair")  # HF: a text pair
    accelerated(["x", "y"], return_tensors="np")  # HF: a call the policy refuses counts each of its texts
    accelerated([GUARDED, "plain"])  # the guard hands one text to HF; the backend answers the call
    assert moved(before, samples()) == {
        "fast": 1 + 3 + 1,
        "text_pair": 1,
        "return_tensors": 2,
        "unicode_guard": 1,
        "fast calls": 3,
        "hf calls": 2,
    }
    stats = accelerated.tokbackend.stats()  # the same counts as stats()
    assert stats.fast_texts - stats_before.fast_texts == 5
    fallbacks = {reason: count - stats_before.fallbacks.get(reason, 0) for reason, count in stats.fallbacks.items()}
    assert {reason: count for reason, count in fallbacks.items() if count} == {
        "text_pair": 1,
        "return_tensors": 2,
        "unicode_guard": 1,
    }


def test_each_text_is_counted_once_fast_or_by_its_one_reason(accelerated):
    """stats() and the metrics sum to the texts the calls carried: each text once, answered fast
    or handed over for one reason (before: a call whose ids would be cut counted its texts as fast
    and as truncation)."""
    long = "one two three four five six seven"
    calls = [
        (lambda: accelerated.encode("hello world"), 1),
        (lambda: accelerated(["one", "two", "three"]), 3),
        (lambda: accelerated("a question", "its pair"), 1),
        (lambda: accelerated(long, truncation=True, max_length=3), 1),  # would be cut: HF answers
        (lambda: accelerated(long, truncation=True, max_length=64), 1),  # fits: the backend answers
        (lambda: accelerated([long, "short"], truncation=True, max_length=3), 2),  # HF answers the call
        (lambda: accelerated([GUARDED, "plain"]), 2),
        (lambda: accelerated(["x", "yy"], padding=True), 2),
    ]
    reasons = ("text_pair", "truncation", "unicode_guard", "padding")
    before_stats = accelerated.tokbackend.stats()
    before = {"fast": sample("tokbackend_fast_texts_total")}
    before.update({reason: sample("tokbackend_fallback_texts_total", reason=reason) for reason in reasons})
    for call, _ in calls:
        call()
    stats = accelerated.tokbackend.stats()
    counted = stats.fast_texts - before_stats.fast_texts
    counted += sum(count - before_stats.fallbacks.get(reason, 0) for reason, count in stats.fallbacks.items())
    assert counted == sum(texts for _, texts in calls)
    assert stats.fallbacks["truncation"] - before_stats.fallbacks.get("truncation", 0) == 3
    exported = sample("tokbackend_fast_texts_total") - before["fast"]
    exported += sum(sample("tokbackend_fallback_texts_total", reason=reason) - before[reason] for reason in reasons)
    assert exported == counted


def test_an_encode_handed_to_hf_is_timed_as_hf_once(accelerated):
    before = samples()
    accelerated.encode("a question", "its pair")  # `encode`'s own hand-over, through HF's `_encode_plus`
    accelerated.tokenize("not an encode")  # HF's tokens: neither counted nor timed
    assert moved(before, samples()) == {"text_pair": 1, "hf calls": 1}
    histogram = sample("tokbackend_encode_seconds_sum", path="hf")
    assert 0 < histogram < 60


def test_the_encode_histogram_buckets_step_1_2_5_from_10_microseconds_to_1_second(accelerated):
    """A dashboard selects a bucket by its `le` label: each bound reads as its decimal literal."""
    accelerated.encode("hello world")
    [histogram] = [
        metric for metric in prometheus_client.REGISTRY.collect() if metric.name == "tokbackend_encode_seconds"
    ]
    labels = [
        entry.labels["le"]
        for entry in histogram.samples
        if entry.name.endswith("_bucket") and entry.labels["path"] == "fast"
    ]
    decades = ["1e-05", "2.5e-05", "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005"]
    assert labels == [*decades, "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1.0", "+Inf"]


class Unloadable(GigatokenBackend):
    name = "unloadable"

    def __init__(self, tokenizer_json, options=None):
        raise BackendUnavailableError("unloadable: planted")


def test_each_build_is_counted_with_what_serves_or_why_nothing_does(register_for_test):
    served = {"backend": "fastokens", "outcome": "served"}
    unavailable = {"backend": "unloadable", "outcome": "unavailable"}
    before = sample("tokbackend_builds_total", **served), sample("tokbackend_builds_total", **unavailable)
    tokbackend.accelerate(fresh_qwen3(), "fastokens")
    register_for_test("unloadable", Unloadable)
    with pytest.raises(BackendUnavailableError):
        tokbackend.accelerate(fresh_qwen3(), "unloadable")  # counted, then raised
    off = tokbackend.accelerate(fresh_qwen3(), "unloadable", allow_hf_fallback=True)
    assert not off.tokbackend.fast_path_enabled
    after = sample("tokbackend_builds_total", **served), sample("tokbackend_builds_total", **unavailable)
    assert (after[0] - before[0], after[1] - before[1]) == (1, 2)


# One process of a server in multiprocess mode: 2 texts for the backend and a text pair for HF,
# then a forked child that encodes 3 more texts. With `late`, PROMETHEUS_MULTIPROC_DIR is set
# after tokbackend is imported, as SGLang sets it after importing its plugins.
_SERVER_PROCESS = textwrap.dedent(
    """
    import os, sys
    directory, late = sys.argv[1], sys.argv[2] == "late"
    if not late:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    import tokbackend, tokbackend.integrations.sglang
    if late:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = directory
    fast = tokbackend.accelerate(tokbackend.load_hf("qwen3"), "fastokens")
    fast.encode("hello")
    fast(["one"])
    fast("a question", "its pair")
    child = os.fork()
    if child == 0:
        fast(["three", "four", "five"])
        os._exit(0)
    _, status = os.waitpid(child, 0)
    assert status == 0, status
    """
)


def test_multiprocess_mode_sums_every_process_including_forked_children(tmp_path):
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _SERVER_PROCESS, str(tmp_path), when], stderr=subprocess.PIPE, text=True
        )
        for when in ("early", "late")
    ]
    for process in processes:
        _, errors = process.communicate(timeout=300)
        assert process.returncode == 0, errors
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    assert len(list(tmp_path.glob("counter_*.db"))) == 4  # two processes, each with a forked child
    read = registry.get_sample_value
    assert read("tokbackend_fast_texts_total", {}) == 2 * (1 + 1 + 3)
    assert read("tokbackend_fallback_texts_total", {"reason": "text_pair"}) == 2
    assert read("tokbackend_fallback_texts_total", {"reason": "padding"}) == 0  # each reason is there, at 0
    assert read("tokbackend_builds_total", {"backend": "fastokens", "outcome": "served"}) == 2
    assert read("tokbackend_encode_seconds_count", {"path": "fast"}) == 2 * 3
    assert read("tokbackend_encode_seconds_count", {"path": "hf"}) == 2


@pytest.mark.parametrize("without", ["not importable", "TOKBACKEND_METRICS=0"])
def test_without_prometheus_client_nothing_is_made_and_encode_is_unchanged(without):
    check = textwrap.dedent(
        """
        import os, sys
        if os.environ.get("TOKBACKEND_METRICS") != "0":
            sys.modules["prometheus_client"] = None  # not importable
        import tokbackend
        from tokbackend import _metrics
        hf = tokbackend.load_hf("qwen3")
        fast = tokbackend.accelerate(hf, "fastokens")
        texts = ["hello world", "a\\u0300\\u0300\\u1ae6 guarded \\u017f's text"]
        assert [fast.encode(text) for text in texts] == [hf.encode(text) for text in texts]
        assert fast(texts, padding=True)["input_ids"] == hf(texts, padding=True)["input_ids"]
        stats = fast.tokbackend.stats()
        assert (stats.fast_texts, stats.fallbacks) == (1, {"unicode_guard": 1, "padding": len(texts)}), stats
        assert _metrics.METRICS is None and fast.tokbackend.metrics is None
        assert [name for name in sys.modules if name.startswith("prometheus_client")] in ([], ["prometheus_client"])
        assert ("prometheus_client" in sys.modules) is (os.environ.get("TOKBACKEND_METRICS") != "0")
        """
    )
    environment = {**os.environ, "TOKBACKEND_METRICS": "0" if without == "TOKBACKEND_METRICS=0" else "1"}
    done = subprocess.run(
        [sys.executable, "-c", check], capture_output=True, text=True, timeout=300, check=False, env=environment
    )
    assert done.returncode == 0, done.stderr


def test_importing_tokbackend_imports_no_prometheus_client():
    """prometheus_client picks multiprocess mode as it is imported: tokbackend's import must leave
    that to the server, which sets PROMETHEUS_MULTIPROC_DIR after importing its plugins."""
    check = (
        "import sys, tokbackend, tokbackend.integrations.sglang, tokbackend.integrations.vllm; "
        "assert 'prometheus_client' not in sys.modules and 'tokbackend._metrics' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr


def test_the_guarded_text_is_guarded_by_fastokens(accelerated):
    """The premise of the counts above: fastokens' guard hands `GUARDED` to HF."""
    assert set(map(ord, GUARDED)) & accelerated.tokbackend.guard.code_points
