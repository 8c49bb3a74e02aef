"""Start-up: `accelerate()` returns a final build (the backend loaded, its exact guard found or
derived, the boot probe passed), in-process as in the servers' processes; what a server process
logs and shares; what a process that exits at once leaves running; a built state never replaced
by another build of the same tokenizer state.
"""

from __future__ import annotations

import copy
import dataclasses
import logging

import pytest
from defects import finish_without_package_data

import tokbackend
from tokbackend import _guard as guard_module
from tokbackend._guard import GuardSettings, derive
from tokbackend._guard.contexts import candidate_runs, run_around, sample
from tokbackend._guard.derive import FULL_PLANES, _hf_encoder
from tokbackend._guard.records import record_key
from tokbackend.backends import backend_class
from tokbackend.equivalence.families import build_family

TEXTS = [
    "Ready? 毕老师说：naïve café, Привет, 🤖 1234",
    "e\u0301 A\u030a combining marks, ſ's case relatives",
    "<|im_start|>user\nhi 12345<|im_end|>",
]


@pytest.fixture
def unseen_pipeline(monkeypatch, tmp_path) -> tokbackend.AccelerationOptions:
    """An empty cache, and options that read shipped records from an empty directory: every
    pipeline is one tokbackend has not seen."""
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path / "cache"))
    return tokbackend.AccelerationOptions(guard=GuardSettings(shipped_records=tmp_path / "no-shipped-records"))


@pytest.fixture(scope="module")
def qwen3():
    return tokbackend.load_hf("qwen3")


@pytest.mark.parametrize("backend", ["gigatoken", "fastokens"])
def test_an_unseen_pipeline_is_served_with_its_exact_guard_from_the_first_call(qwen3, unseen_pipeline, backend):
    """No record ships for it: `accelerate()` derives the exact guard before it returns, and the
    build that serves the first call is final."""
    fast = tokbackend.accelerate(qwen3, backend, options=unseen_pipeline)
    state = fast.tokbackend
    assert state.stats()["start_up"]["phase"] == "final" and state.guard.record["matched"] == "derived here"
    assert [fast.encode(text) for text in TEXTS] == [qwen3.encode(text) for text in TEXTS]
    assert state.stats()["fast_texts"] >= 2


def test_the_guard_module_derives_nothing_with_a_record(qwen3, monkeypatch):
    """With a shipped record no derivation starts at all."""
    monkeypatch.setattr(
        guard_module.derive, "derive_record", lambda *args, **kwargs: pytest.fail("derived with a record")
    )
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    assert fast.tokbackend.stats()["start_up"]["phase"] == "final" and "shipped" in fast.tokbackend.stats()["guard"]
    assert [fast.encode(text) for text in TEXTS] == [qwen3.encode(text) for text in TEXTS]


@pytest.fixture
def failing_finish(monkeypatch):
    """Planted: the guard's derivation raises, as it did where a wheel lacked the package data
    every derivation reads (FileNotFoundError)."""
    finish_without_package_data(monkeypatch)


@pytest.mark.parametrize("backend", ["gigatoken", "auto"])
def test_a_derivation_that_fails_is_reported_by_accelerate_itself(qwen3, unseen_pipeline, failing_finish, backend):
    """Nothing serves before the exact guard exists: a failure there is `accelerate()`'s own
    error, or, with allow_hf_fallback, the fast path off with the reason in stats()."""
    with pytest.raises(tokbackend.BackendUnavailableError, match="FileNotFoundError: planted"):
        tokbackend.accelerate(qwen3, backend, options=unseen_pipeline)
    fast = tokbackend.accelerate(qwen3, backend, options=unseen_pipeline, allow_hf_fallback=True)
    stats = fast.tokbackend.stats()
    assert stats["start_up"]["phase"] == "off" and "FileNotFoundError: planted" in stats["disabled_reason"]
    assert [fast.encode(text) for text in TEXTS] == [qwen3.encode(text) for text in TEXTS]
    assert fast.tokbackend.stats()["fast_texts"] == 0  # every one of them went to HF


def _server_lines(caplog, model: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if f"tokenizer for {model}" in record.getMessage()]


def test_a_server_process_serves_with_the_final_build_and_says_so(qwen3, unseen_pipeline, caplog):
    """On a fresh replica the integration builds the final build (auto's choice, the derived
    record) before the process serves, and its one line names what serves."""
    from tokbackend.integrations._common import accelerate_for_server

    with caplog.at_level(logging.WARNING, logger="tokbackend"):
        fast = accelerate_for_server(
            qwen3, "qwen3", "--tokenizer-backend tokbackend-auto", "SGLang", options=unseen_pipeline
        )
    assert fast.tokbackend.stats()["start_up"]["phase"] == "final" and fast.tokbackend.fast_path_enabled
    assert fast.tokbackend.routing.lane.name == "fastokens"
    (line,) = _server_lines(caplog, "qwen3")
    assert "(built in " in line and "backend auto (fastokens" in line and "derived here" in line
    assert "not built: gigatoken" in line


def test_a_second_load_in_a_server_process_shares_the_first_build(qwen3, unseen_pipeline, caplog):
    """SGLang's scheduler loads the tokenizer twice (for itself and its model worker): the second
    load serves with the first one's build rather than building it again on the way to /health,
    but only where the two encode alike: an added token, or other options, build anew."""
    from tokbackend.integrations._common import accelerate_for_server

    flag = "--tokenizer-backend tokbackend-auto"
    first = accelerate_for_server(qwen3, "qwen3", flag, "SGLang", options=unseen_pipeline)
    second = accelerate_for_server(tokbackend.load_hf("qwen3"), "qwen3", flag, "SGLang", options=unseen_pipeline)
    assert second is not first and second.tokbackend.build is first.tokbackend.build
    line = _server_lines(caplog, "qwen3")[-1]
    assert "the build of an earlier load in this process" in line
    text = "Ready? 毕老师说 naïve 🤖 1234 <think>x</think>"
    assert second.encode(text) == qwen3.encode(text) and second.tokbackend.stats()["fast_texts"] >= 1

    changed = tokbackend.load_hf("qwen3")
    changed.add_tokens(["<planted-tool>"])
    third = accelerate_for_server(changed, "qwen3", flag, "SGLang", options=unseen_pipeline)
    assert third.tokbackend.build is not first.tokbackend.build
    assert third.encode("a<planted-tool>b") == changed.encode("a<planted-tool>b") != qwen3.encode("a<planted-tool>b")
    other = accelerate_for_server(
        tokbackend.load_hf("qwen3"), "qwen3", "--tokenizer-backend gigatoken", "SGLang", options=unseen_pipeline
    )
    assert other.tokbackend.build is not first.tokbackend.build and other.tokbackend.routing.lane.name == "gigatoken"


def test_a_second_load_shares_nothing_where_the_vocabulary_differs(qwen3, unseen_pipeline):
    """Planted: a tokenizer whose pipeline and added tokens are the earlier one's, with two
    tokens' ids swapped in its vocabulary (what a build's content leaves out): built anew."""
    import json

    from tokenizers import Tokenizer

    from tokbackend.integrations._common import accelerate_for_server

    flag = "--tokenizer-backend tokbackend-fastokens"
    first = accelerate_for_server(qwen3, "qwen3", flag, "SGLang", options=unseen_pipeline)
    data = json.loads(qwen3.backend_tokenizer.to_str())
    vocab = data["model"]["vocab"]
    vocab["hello"], vocab["world"] = vocab["world"], vocab["hello"]
    swapped = copy.copy(qwen3)
    swapped._tokenizer = Tokenizer.from_str(json.dumps(data))
    second = accelerate_for_server(swapped, "qwen3", flag, "SGLang", options=unseen_pipeline)
    assert second.tokbackend.build is not first.tokbackend.build
    assert second.encode("hello world") == swapped.encode("hello world") != qwen3.encode("hello world")


def test_a_server_refuses_to_start_when_its_build_fails(qwen3, unseen_pipeline, failing_finish, monkeypatch):
    from tokbackend.integrations._common import ALLOW_FALLBACK_ENV, accelerate_for_server

    refused = "cannot serve qwen3.*building its lane failed: FileNotFoundError: planted.*Remove the flag"
    with pytest.raises(RuntimeError, match=refused):
        accelerate_for_server(qwen3, "qwen3", "--tokenizer-backend tokbackend-auto", "SGLang", options=unseen_pipeline)
    monkeypatch.setenv(ALLOW_FALLBACK_ENV, "1")  # the operator's choice: serve it with HF
    served = accelerate_for_server(qwen3, "qwen3", "--tokenizer-backend gigatoken", "SGLang", options=unseen_pipeline)
    assert not served.tokbackend.fast_path_enabled and "FileNotFoundError: planted" in served.tokbackend.disabled_reason
    assert served.encode(TEXTS[0]) == qwen3.encode(TEXTS[0])


def test_the_screen_on_the_served_tokenizer_sees_what_its_own_instances_see(monkeypatch):
    """With the ids oracle (a SentencePiece-style pipeline) the start-up screen runs on the served
    tokenizer and backend instead of building its own. Planted: a served backend wrong on one
    sampled code point outside every candidate run; the scan must widen to the run around it."""
    tokenizer_json = build_family("mistral-metaspace", "small").backend_tokenizer.to_str()
    kind = backend_class("gigatoken")
    backend = kind(tokenizer_json, kind.options_for_scanning())
    planted = next(point for point in sample(FULL_PLANES, candidate_runs(tokenizer_json)) if point > 0x4E00)
    built = []
    monkeypatch.setattr(derive, "_hf_encoder", lambda text: built.append(text) or _hf_encoder(text))

    def wrong(texts):
        return [ids[:-1] if chr(planted) in text else ids for text, ids in zip(texts, backend.encode_batch(texts))]

    class ScansBegin(Exception):
        """Raised where the scans after the screen build their own pair: the test stops there."""

    def scans_begin(text):
        raise ScansBegin

    def widened(candidate):
        served = (_hf_encoder(tokenizer_json), candidate)
        built.clear()
        runs = []
        monkeypatch.setattr(derive, "run_around", lambda point: runs.append(run_around(point)) or runs[-1])
        with pytest.raises(ScansBegin):
            key = record_key(tokenizer_json, "gigatoken")
            derive.derive_record(key, scans_begin, {}, served=served)
        assert len(built) == 1  # the scans' HuggingFace encoder alone: the screen used the served encoders
        return {point for low, high in runs for point in range(low, high + 1)}

    first, last = run_around(planted)
    assert planted not in widened(backend.encode_batch)
    assert set(range(first, last + 1)) <= widened(wrong)


# accelerate() returns with its backend loaded and warmed once, and nothing of it running on:
# a gigatoken load or warm-up holds the GIL, and beside a fresh process's first burst it held the
# burst up. What runs after it returns prints.
NOTHING_RUNS_ON = """
import sys, threading
import tokbackend
from tokbackend.backends._gigatoken import GigatokenBackend

load, warm_up, events = GigatokenBackend.__init__, GigatokenBackend.prepare, []
returned = False

def recorded_load(self, *args, **kwargs):
    load(self, *args, **kwargs)
    events.append(("load", returned))

def recorded_warm_up(self):
    warm_up(self)
    events.append(("warm", returned))

GigatokenBackend.__init__, GigatokenBackend.prepare = recorded_load, recorded_warm_up
fast = tokbackend.accelerate(tokbackend.load_hf("qwen3"), sys.argv[1])
returned = True
running = [thread.name for thread in threading.enumerate() if thread.name.startswith("tokbackend")]
print("SERVES", fast.tokbackend.stats()["start_up"]["phase"], fast.encode("Hello"), events, running, flush=True)
"""


def test_accelerate_returns_warmed_and_nothing_running_on(tmp_path):
    import os
    import subprocess
    import sys

    environment = {**os.environ, "TOKBACKEND_CACHE_DIR": str(tmp_path / "cache")}
    completed = subprocess.run(
        [sys.executable, "-c", NOTHING_RUNS_ON, "gigatoken"],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    # the serving instance loaded and warmed before the return, and no other instance (a renewal
    # builds its fresh one when the caches have grown, not ahead of time)
    assert "SERVES final [9707] [('load', False), ('warm', False)] []" in completed.stdout, completed.stdout


def test_a_final_build_is_not_replaced_by_another_of_the_same_state(qwen3):
    """`_swap` is the one place a build is swapped in, and only `UNBUILT` gives way to a build of
    the same tokenizer state: planted, a build
    of the same tokenizer state with the fast path off put over the final one is refused, and
    the final build serves on."""
    fast = tokbackend.accelerate(qwen3, "gigatoken")
    state = fast.tokbackend
    final = state.build
    off = dataclasses.replace(final, disabled_reason="planted")
    assert final.phase == "final" and off.phase == "off"
    refused = "phase 'final' cannot be replaced by one in phase 'off'"
    with pytest.raises(tokbackend.TokbackendError, match=refused), state._rebuild_lock:
        state._swap(off, state.serving[1])
    assert state.build is final and fast.encode(TEXTS[1]) == qwen3.encode(TEXTS[1])


def test_a_server_component_that_encodes_no_prompts_is_read_from_the_calling_code():
    """The server integrations keep HuggingFace's tokenizer where the code loading it is one of
    the server's components that encode no prompts (SGLang's scheduler, vLLM's engine core): the
    nearest such module on the calling stack, a submodule of one too, and nothing elsewhere."""
    import types

    from tokbackend.integrations._common import prompt_free_caller

    scheduler = types.ModuleType("server.managers.scheduler_parts")
    exec("def init_tokenizer(load):\n    return load()\n", scheduler.__dict__)

    def load():
        return prompt_free_caller(("server.managers.scheduler", "server.managers.detokenizer"))

    assert scheduler.init_tokenizer(load) is None  # "scheduler_parts" is no submodule of "scheduler"
    scheduler.__dict__["__name__"] = "server.managers.scheduler.parts"
    assert scheduler.init_tokenizer(load) == "server.managers.scheduler.parts"
    assert load() is None
