"""What an accelerated tokenizer shares with HF's beyond ids: threads, left-behind state, warnings, results.

Each check takes an HF tokenizer and an accelerated one that share no Rust state, makes the same
calls on both, and returns None, or a line saying what differs. A call HF answers with an
exception (padding on a tokenizer without a pad token, `word_ids()` without Encodings) is an
answer: ours must raise the same class, and the check goes on with the next call.

- `threads_with_truncation`: four threads truncating every call (vLLM's pattern) on long texts
  HF must cut and texts holding a guarded code point, which the guard hands to HF internally
  (each one new, so that no cache answers it instead);
- `settings_left`: after each of a sequence of calls, the Rust tokenizer's truncation, padding
  and `encode_special_tokens`, and then `save_pretrained`'s tokenizer.json, byte for byte;
- `length_warnings`: HF's once-per-object length warning, with HF's numbers, and none from
  internal calls (the guard's hand-over, a rebuild's probe after `add_tokens`);
- `result_operations`: a result's Encodings (`tokens()`, `word_ids()`, offsets, pickle, deepcopy)
  after the caller edits its ids in place and after the tokenizer changed.
"""

from __future__ import annotations

import copy
import logging
import pickle
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .corpus import prompt_text
from .differential import Raised, answer_of

LONG = "The quick brown fox 毕老师 don't 12345 " * 400


def calls_leaving_settings(guarded: str) -> list[tuple[str, Callable]]:
    """Calls the fast path answers (plain, truncating that cuts nothing, batches, `encode`) and
    calls handed to HF (a cut, padding, split special tokens, a guarded text), by name."""
    return [
        ("cut", lambda t: t(LONG, truncation=True, max_length=8)),
        ("fits", lambda t: t("hello world", truncation=True, max_length=8)),
        ("plain", lambda t: t("hello world")),
        ("padding", lambda t: t("hello", padding="max_length", max_length=300)),
        ("encode", lambda t: t.encode("hello world")),
        ("split", lambda t: t("<|im_start|>hi", split_special_tokens=True)),
        ("batch fits", lambda t: t(["a b", "c"], truncation=True, max_length=20)),
        ("guarded", lambda t: t(guarded)),
        ("guarded fits", lambda t: t(guarded, truncation=True, max_length=30)),
        ("left", lambda t: t("hello world", truncation="only_first", max_length=12)),
        ("tokenize", lambda t: t.tokenize("hello")),
    ]


def settings_of(rust) -> tuple:
    return rust.truncation, rust.padding, rust.encode_special_tokens


def threads_with_truncation(hf, accelerated, guarded: str, calls_per_thread: int = 320) -> str | None:
    """Every guarded text is one no call has sent before (its call's number in it), so that each
    reaches HuggingFace through an internal call: a segment cache that kept HF's ids of a guarded
    text would otherwise answer its repeats, and the internal calls a race needs would stop."""
    long_texts = [prompt_text(seed, 3000, "prose") for seed in range(4)]
    texts = [
        [
            long_texts[(offset + call) % 4] if call % 2 == 0 else f"{guarded} {offset} {call}"
            for call in range(calls_per_thread)
        ]
        for offset in range(4)
    ]
    expected = [_truncated_ids(hf, worker_texts) for worker_texts in texts]
    start, wrong, errors = threading.Barrier(4), [], []

    def worker(offset: int) -> None:
        start.wait()
        try:
            for call, text in enumerate(texts[offset]):
                ids = answer_of(lambda text=text: accelerated(text, truncation=True, max_length=16)["input_ids"])
                if ids != expected[offset][call]:
                    wrong.append((text[:40], _shown(ids), _shown(expected[offset][call])))
        except BaseException as error:  # noqa: BLE001 - any error is a difference from HF
            errors.append(error)

    threads = [threading.Thread(target=worker, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(600)
    if any(thread.is_alive() for thread in threads):
        return "4 threads truncating every call did not finish: deadlock or stall"
    if errors:
        return f"4 threads truncating every call: {errors[0]!r}"
    if wrong:
        text, ours, theirs = wrong[0]
        example = f"{ours} for text {text!r}..., HF's {theirs}"
        return f"{len(wrong)} of {4 * calls_per_thread} truncating calls from 4 threads wrong (e.g. {example})"
    return None


def _truncated_ids(hf, texts: list[str]) -> list:
    """HF's answer to each text truncated to 16 ids: one batch call, or, where the batch
    raises, each text's own answer (ids or `Raised`)."""
    batch = answer_of(lambda: hf(texts, truncation=True, max_length=16)["input_ids"])
    if not isinstance(batch, Raised):
        return batch
    return [answer_of(lambda text=text: hf(text, truncation=True, max_length=16)["input_ids"]) for text in texts]


def _shown(answer) -> str:
    """An answer for a difference line: '12 ids' or 'raises ValueError: ...'."""
    return str(answer) if isinstance(answer, Raised) else f"{len(answer)} ids"


def _raised_alike(name: str, theirs, ours) -> str | None:
    """None where neither call raised or both raised the same class, else the difference."""
    if (isinstance(theirs, Raised) or isinstance(ours, Raised)) and theirs != ours:
        shown = [str(answer) if isinstance(answer, Raised) else "answers" for answer in (ours, theirs)]
        return f"a {name!r} call {shown[0]}, HF's {shown[1]}"
    return None


def settings_left(hf, accelerated, guarded: str, original=None) -> str | None:
    """None where, after every call of a mixed sequence, `accelerated` (and `original`, the HF
    object it was made from, which shares its Rust tokenizer) shows the settings `hf` shows after
    the same calls, its Rust tokenizer encodes alike, and `save_pretrained` writes the same file."""
    views = [("the accelerated tokenizer", accelerated)] + (
        [("the tokenizer given to accelerate()", original)] if original is not None else []
    )
    if settings_of(accelerated.backend_tokenizer) != settings_of(hf.backend_tokenizer):
        return "the Rust settings after accelerate() differ from HF's"
    steps = calls_leaving_settings(guarded)
    order = [*range(len(steps)), *range(len(steps) - 1, -1, -1), 0, 7, 1, 7, 4, 3, 2, 8, 5, 9, 1]
    probe = guarded + " hello world" * 8
    for index in order:
        name, step = steps[index]
        difference = _raised_alike(name, answer_of(step, hf), answer_of(step, accelerated))
        if difference is not None:
            return difference
        theirs = settings_of(hf.backend_tokenizer)
        their_ids = hf.backend_tokenizer.encode(probe).ids
        for view, tokenizer in views:
            ours = settings_of(tokenizer.backend_tokenizer)
            if ours != theirs:
                return f"after a {name!r} call {view}'s Rust settings are {ours}, HF's {theirs}"
            if view != views[0][0] and tokenizer.backend_tokenizer.encode(probe).ids != their_ids:
                return f"after a {name!r} call {view}'s Rust tokenizer encodes otherwise than HF's"
    with tempfile.TemporaryDirectory() as folder:
        saved = {}
        for name, tokenizer in (("hf", hf), *views):
            tokenizer.save_pretrained(Path(folder) / name)
            saved[name] = (Path(folder) / name / "tokenizer.json").read_bytes()
    for view, _ in views:
        if saved[view] != saved["hf"]:
            return f"save_pretrained's tokenizer.json of {view} differs from HF's"
    return None


class _Collected(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if "sequence length is longer" in message:
            self.messages.append(message)


def _length_warnings_of(tokenizer, calls) -> tuple[list[str], list]:
    """(the length warnings the calls logged, each call's answer)."""
    collected = _Collected()
    logger = logging.getLogger("transformers.tokenization_utils_base")
    # collected, not printed: the warnings this check provokes are its data, not the user's
    logger.addHandler(collected)
    propagate, logger.propagate = logger.propagate, False
    try:
        answers = [answer_of(call, tokenizer) for call in calls]
    finally:
        logger.propagate = propagate
        logger.removeHandler(collected)
    return collected.messages, answers


def length_warnings(hf, accelerated, guarded: str) -> str | None:
    """Changes both tokenizers: `model_max_length` 16 and an added token."""
    calls = [
        lambda t: t(guarded * 3),  # a guarded piece handed over internally: silent on HF
        lambda t: t.add_tokens(["<extra_verify_token>"]),  # a rebuild and its probe on the next call
        lambda t: t("short"),
        lambda t: t.encode(f"{guarded} " + "word " * 20),  # the user's overflow: HF warns here
        lambda t: t.encode("word " * 40),  # and only once
    ]
    for tokenizer in (hf, accelerated):
        tokenizer.model_max_length = 16
    (theirs, their_answers), (ours, our_answers) = (
        _length_warnings_of(hf, calls),
        _length_warnings_of(accelerated, calls),
    )
    for index, (their_answer, our_answer) in enumerate(zip(their_answers, our_answers)):
        difference = _raised_alike(f"call {index + 1} of the length-warning sequence", their_answer, our_answer)
        if difference is not None:
            return difference
    if ours != theirs:
        return f"length warnings {ours} where HF's are {theirs}"
    return None


def encodings_answers(result) -> tuple:
    """What a result's Encodings answer (a fast-path result computes them here); each an answer
    (`answer_of`): a result without Encodings raises, as HF's does."""
    return tuple(
        answer_of(question, result)
        for question in (
            lambda result: result.tokens(),
            lambda result: result.word_ids(),
            lambda result: result.char_to_token(3),
            lambda result: [encoding.offsets for encoding in result.encodings],
            lambda result: pickle.loads(pickle.dumps(result)).tokens(),
            lambda result: copy.deepcopy(result).tokens(),
        )
    )


def result_operations(hf, accelerated) -> str | None:
    """Changes both tokenizers: added tokens."""
    from transformers import BatchEncoding

    answers = []
    for tokenizer in (hf, accelerated):
        edited = tokenizer("hello world, again")
        edited["input_ids"].append(0)
        single, batch, unchanged = tokenizer("hello there world"), tokenizer(["hello there", "x y"]), tokenizer("a b")
        kinds = (type(single), type(batch))
        tokenizer.add_tokens(["there", " b"])
        answers.append(
            (
                kinds,
                encodings_answers(edited),
                encodings_answers(single),
                answer_of(batch.tokens, 1),
                encodings_answers(unchanged),
            )
        )
    if answers[1][0] != (BatchEncoding, BatchEncoding):
        return f"results are {answers[1][0]}, HF's {answers[0][0]}"
    names = ("ids edited in place", "made before add_tokens", "a batch made before add_tokens", "unchanged ids")
    for name, ours, theirs in zip(names, answers[1][1:], answers[0][1:]):
        if ours != theirs:
            return f"a result's Encodings ({name}) answer {str(ours)[:120]}, HF's {str(theirs)[:120]}"
    return None
