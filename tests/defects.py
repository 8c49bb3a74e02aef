"""Planted defects, in one place: wrong backends, guards, splitters, and how a test serves with one.

Every exactness gate must be shown to fail on a defect of the class it covers; the tests plant
these. A defective guard or splitter is planted by building a routing (or segments) with it and
serving the tokenizer with that build, as a rebuild would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import mmap
import re
import threading
from array import array

from tokbackend._added_tokens import AddedToken, AddedTokens
from tokbackend._guard import UnicodeGuard
from tokbackend._routing import Routing
from tokbackend._segments import AddedTokenSplitter, Segments, text_of
from tokbackend._shared_settings import SettingsGate, apply, read
from tokbackend._tokenizer import AcceleratedTokenizerMixin, HFReference
from tokbackend.backends._gigatoken import GigatokenBackend
from tokbackend.backends._hf import HFBackend

# -- backends ------------------------------------------------------------------------------


class WrongInEveryForm(GigatokenBackend):
    """Base of the wrong backends: its array form is its (wrong) lists, converted."""

    def encode_array(self, text):
        return array("q", self.encode(text))

    def encode_batch_arrays(self, texts):
        return [array("q", ids) for ids in self.encode_batch(texts)]


class DropsLastId(WrongInEveryForm):
    """A wrong backend: drops the last id of every text `wrong_on` holds for, in every form."""

    @staticmethod
    def wrong_on(text: str) -> bool:
        raise NotImplementedError

    def encode_batch(self, texts):
        return [
            ids[:-1] if ids and self.wrong_on(text) else ids for text, ids in zip(texts, super().encode_batch(texts))
        ]

    def encode(self, text):
        return self.encode_batch([text])[0]


class ArraysDropLastId(GigatokenBackend):
    """Right in lists, wrong as arrays (SGLang's form): drops the last id of every text
    `wrong_on` holds for."""

    @staticmethod
    def wrong_on(text: str) -> bool:
        raise NotImplementedError

    def encode_array(self, text):
        return self.encode_batch_arrays([text])[0]

    def encode_batch_arrays(self, texts):
        rows = super().encode_batch_arrays(texts)
        return [row[:-1] if row and self.wrong_on(text) else row for text, row in zip(texts, rows)]


class OneTextWrongOnVai(GigatokenBackend):
    """Right in batches, wrong in its single-text calls (lists and arrays), which serve most
    requests: drops the last id of a text holding U+A501 (a Vai syllable, in no scan context)."""

    name = "one-text-wrong-on-vai"

    def encode(self, text):
        ids = super().encode(text)
        return ids[:-1] if ids and "\ua501" in text else ids

    def encode_array(self, text):
        return array("q", self.encode(text))


def _has_digit(text: str) -> bool:
    return any(character.isdigit() for character in text)


def _is_long(text: str) -> bool:
    """Over 8,000 characters: longer than every boot-probe string."""
    return len(text) > 8000


class DropsAfterDigits(DropsLastId):
    """Drops the last token of any text containing a digit."""

    name = "drops-after-digits"
    wrong_on = staticmethod(_has_digit)


class DropsOnLongTexts(DropsLastId):
    """A wrong backend the boot probe cannot see: drops the last token of texts over 8,000
    characters. The live serving gate plants the same class."""

    name = "drops-on-long-texts"
    wrong_on = staticmethod(_is_long)


class DropsOnCombiningAcute(DropsLastId):
    """Wrong on every text holding U+0301 (a combining mark, which a guard may send to
    HuggingFace, so a probe made under such a guard cannot see this)."""

    name = "drops-on-combining-acute"
    wrong_on = staticmethod(lambda text: "\u0301" in text)


class DropsBetweenAddedTokens(DropsLastId):
    """Wrong where two of Qwen's added tokens stand side by side ("...|><|..."), as a backend
    whose own added-token pass loses one of two adjacent matches would be."""

    name = "drops-between-added-tokens"
    wrong_on = staticmethod(lambda text: "|><|" in text)


class DropsOnAsciiLetters(DropsLastId):
    """Wrong on every text holding an ASCII letter (as gigatoken was after a ByteLevel
    add_prefix_space set in place): wrong where no guard sends a text to HuggingFace. Records the
    largest code point it was asked to encode (`largest_seen`), to show how far a derivation got."""

    name = "drops-on-ascii-letters"
    largest_seen = 0

    @staticmethod
    def wrong_on(text: str) -> bool:
        return any(character.isascii() and character.isalpha() for character in text)

    def encode_batch(self, texts):
        DropsOnAsciiLetters.largest_seen = max(
            [DropsOnAsciiLetters.largest_seen, *(ord(max(text)) for text in texts if text)]
        )
        return super().encode_batch(texts)


def slow_to_scan(advance, seconds_per_call: float) -> type[GigatokenBackend]:
    """A right backend whose every batch call takes `seconds_per_call` on a hand clock
    (`advance(seconds)` moves it): a derivation whose meter reads that clock is slow to scan,
    with no test waiting on the wall clock."""

    class SlowToScan(GigatokenBackend):
        name = "slow-to-scan"

        def encode_batch(self, texts):
            advance(seconds_per_call)
            return super().encode_batch(texts)

    return SlowToScan


def resident_block(mebibytes: int) -> mmap.mmap:
    """`mebibytes` MiB of new resident memory: pages mapped for it alone and written, so the
    resident set grows by that much whatever the allocator holds already (a bytes object of
    that size can land on freed pages that are still resident, and nothing grows); released
    to the OS at once when the block is closed or collected."""
    block = mmap.mmap(-1, mebibytes << 20)
    page = b"\x01" * mmap.PAGESIZE
    for offset in range(0, len(block), mmap.PAGESIZE):
        block[offset : offset + mmap.PAGESIZE] = page
    return block


def allocates_when_scanning(mebibytes_per_call: int) -> type[GigatokenBackend]:
    """A right backend that keeps `mebibytes_per_call` MiB of new resident memory from every
    batch call (in its class's `held`, cleared by the test): a derivation with it grows
    without bound."""

    class AllocatesWhenScanning(GigatokenBackend):
        name = "allocates-when-scanning"
        held: list[mmap.mmap] = []

        def encode_batch(self, texts):
            self.held.append(resident_block(mebibytes_per_call))
            return super().encode_batch(texts)

    return AllocatesWhenScanning


def allocates_while_other_work_frees(freed_mebibytes: int, mebibytes_per_call: int) -> type[GigatokenBackend]:
    """`allocates_when_scanning`, in a process where other work frees `freed_mebibytes` MiB
    (a dropped build, a garbage collection) inside the first batch call of a guard scan (on the
    scan's threads, after the derivation's meter has started): the resident set falls first,
    and a meter reading growth from where it started sees room that the derivation did not
    free. `other_work` holds that memory until then (the test fills it)."""

    class AllocatesWhileOtherWorkFrees(allocates_when_scanning(mebibytes_per_call)):
        name = "allocates-while-other-work-frees"
        other_work: list[mmap.mmap] = []

        def encode_batch(self, texts):
            if threading.current_thread().name.startswith("tokbackend-scan"):
                self.other_work.clear()
            return super().encode_batch(texts)

        @classmethod
        def start_other_work(cls) -> None:
            cls.other_work.append(resident_block(freed_mebibytes))

    return AllocatesWhileOtherWorkFrees


class ArraysDropAfterDigits(ArraysDropLastId):
    name = "arrays-drop-after-digits"
    wrong_on = staticmethod(_has_digit)


class ArraysDropOnLongTexts(ArraysDropLastId):
    name = "arrays-drop-on-long-texts"
    wrong_on = staticmethod(_is_long)


class FastButWrong(HFBackend):
    """A wrong backend for auto: answers instantly and wrongly (one id per text), comes first in
    auto's order and needs no guard, so only the probe stands between it and the routing."""

    name = "fast-but-wrong"
    is_reference = False
    auto_preference = 0

    def encode(self, text):
        return [0]

    def encode_batch(self, texts):
        return [self.encode(text) for text in texts]


# -- start-up work ------------------------------------------------------------------------


def finish_without_package_data(monkeypatch) -> None:
    """Every guard derivation fails as in a wheel that lacks the package data it reads (the
    Unicode history: FileNotFoundError), the failure the packaging issue met after start-up."""
    from tokbackend._guard import derive

    def derive_record(*args, **kwargs):
        raise FileNotFoundError("planted: no Unicode history in this install")

    monkeypatch.setattr(derive, "derive_record", derive_record)


def eager_build_in_every_process(monkeypatch, plugin) -> None:
    """The server `plugin` (`tokbackend.integrations.sglang` or `.vllm`) builds the fast path in
    every process that loads a tokenizer, as it did before: its scheduler-like components too."""
    monkeypatch.setattr(plugin, "PROMPT_FREE_MODULES", ())


_PRELOAD_CODE = """
import importlib, inspect, sys
from tokbackend._process import preload
plugin, defect, module, call = sys.argv[1:5]
if defect == "defect":  # eager_build_in_every_process, planted in this interpreter
    importlib.import_module(plugin).PROMPT_FREE_MODULES = ()
entry = importlib.import_module(module)  # an import error fails the check, with its traceback
try:
    eval(call, {"entry": entry, "inspect": inspect})
except Exception:  # given no real arguments, the entry point fails once past loading the plugins
    pass
assert plugin in sys.modules, f"{call} loaded no plugins: it proves nothing"
print("PRELOAD", preload.started())
"""


def preload_started_in(plugin: str, module: str, call: str, defect: bool = False) -> bool:
    """Whether tokbackend's preload started in a fresh interpreter that imports `module` and runs
    `call` (an expression naming it `entry`): one of a server's process entry points, which load the
    plugins first. `plugin` (a module name) must have been loaded by then; where `defect`,
    `eager_build_in_every_process` is planted in it first."""
    import subprocess
    import sys

    command = [sys.executable, "-c", _PRELOAD_CODE, plugin, "defect" if defect else "none", module, call]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert "PRELOAD" in completed.stdout, completed.stderr[-3000:]
    return "PRELOAD True" in completed.stdout


# -- guards --------------------------------------------------------------------------------


class FirstThousandCharacters(UnicodeGuard):
    """A guard that reads only the start of a text."""

    def needs_hf(self, text: str) -> bool:
        return super().needs_hf(text[:1000])


def serve_with_guard(tokenizer, guard: UnicodeGuard) -> None:
    """Serve `tokenizer` with every lane of its routing guarded by `guard` instead."""
    state = tokenizer.tokbackend
    build = state.build
    lane = dataclasses.replace(build.routing.lane, guard=guard)
    _serve(state, dataclasses.replace(build, routing=Routing(lane, build.routing.reason)))


# -- splitters -----------------------------------------------------------------------------


def splitter_of(tokens: dict[str, int]) -> AddedTokenSplitter:
    """A splitter for special tokens (not normalized, no flags) content -> id."""
    specials = [AddedToken(token_id, content, special=True, normalized=False) for content, token_id in tokens.items()]
    return AddedTokenSplitter(AddedTokens(specials, None, True))


class OffByOne(AddedTokenSplitter):
    """The first character after each added token is moved into the piece before."""

    def __init__(self, tokens: dict[str, int]) -> None:
        super().__init__(splitter_of(tokens).tokens)

    def split(self, text, start=0):
        parts = [text_of(part) for part in super().split(text, start)]
        for index in range(1, len(parts) - 1):
            if (
                type(parts[index]) is int
                and type(parts[index + 1]) is str
                and index > 0
                and type(parts[index - 1]) is str
            ):
                parts[index - 1] += parts[index + 1][0]
                parts[index + 1] = parts[index + 1][1:] or " "
        return parts


class ShortestFirst(AddedTokenSplitter):
    """The shortest added token wins where two start at one position."""

    def __init__(self, tokens: dict[str, int]) -> None:
        super().__init__(splitter_of(tokens).tokens)
        self._pattern = re.compile("(" + "|".join(map(re.escape, sorted(tokens, key=len))) + ")")

    def split(self, text, start=0):
        parts = self._pattern.split(text[start:])
        return [part if index % 2 == 0 else self.ids[part] for index, part in enumerate(parts) if part]


class CutsAnywhere(AddedTokenSplitter):
    """The prefix memo trusts every remembered prefix, also where a longer added token of the new
    text starts inside the prefix's last token and runs past its end."""

    def __init__(self, tokens: dict[str, int]) -> None:
        super().__init__(splitter_of(tokens).tokens)

    def cuts_at(self, text, position):
        return True


def memo_one_id_short(remember, only: type | None = None):
    """`SegmentCache.remember` planted: the newest chunk of the ids the prefix memo keeps loses
    its last id (only chunks of type `only`, list or array, where given): every piece is right,
    the reuse of an earlier turn is not."""

    def planted(self, text, chars, chunks, replaces):
        if chunks and chunks[-1] and (only is None or type(chunks[-1]) is only):
            chunks = (*chunks[:-1], chunks[-1][:-1])
        remember(self, text, chars, chunks, replaces)

    return planted


def serve_with_splitter(tokenizer, splitter: AddedTokenSplitter) -> None:
    """Serve `tokenizer` with `splitter` in place of its segment cache's own (the cache kept)."""
    state = tokenizer.tokbackend
    build = state.build
    _serve(state, dataclasses.replace(build, segments=Segments(splitter, build.segments.cache)))


def _serve(state, build) -> None:
    """Serve with `build` as a rebuild would: one assignment, the fingerprint it was found right for kept."""
    state._serving = (build, state._serving[1])


# -- the per-call check --------------------------------------------------------------------


def serve_with_fingerprint(tokenizer, fingerprint) -> None:
    """Serve `tokenizer` with `fingerprint()` as the per-call check of whether it changed."""

    class Planted(HFReference):
        __slots__ = ()

        def fingerprint(self):
            return fingerprint()

    tokenizer._tokbackend_reference = Planted(tokenizer, tokenizer._tokbackend_reference.model)
    state = tokenizer.tokbackend
    state._serving = (state.build, fingerprint())


# -- what HF's calls share: the Rust settings, the length warning, result Encodings ----------


class RestoresWithoutWaiting(SettingsGate):
    """Internal calls put the Rust settings back, but wait for no other call: right on one
    thread, wrong under threads (an internal call turns truncation off under a user's call)."""

    @contextlib.contextmanager
    def entered(self, rust, key, internal):
        before = read(rust)
        try:
            yield
        finally:
            if internal:
                apply(rust, before)


class ForgetsAnswers(SettingsGate):
    """Fast-path answers record nothing: the Rust settings stay those of HF's last call."""

    def answered(self, rust, settings) -> None:
        pass


def internal_calls_warn(self, text, add_special_tokens, kwargs, key):
    """HFReference._internal as it was: HF's own call, with the length warning left on."""
    tokenizer = self._tokenizer
    with tokenizer._tokbackend_gate.entered(tokenizer._tokenizer, key, internal=True):
        return super(AcceleratedTokenizerMixin, tokenizer)._encode_plus(text, None, add_special_tokens, **kwargs)


def encodings_of_the_current_state(self, text, add_special_tokens, kwargs, truncation_side, serving):
    """HFReference.hf_encodings without the state the call saw: HF's call made now."""
    return self._internal(text, add_special_tokens, kwargs, ("encodings",)).encodings


def rust_panic(message: str) -> BaseException:
    """An exception as pyo3 raises a Rust panic: a BaseException (not an Exception) whose class
    is `PanicException` in module `pyo3_runtime`, which cannot be imported."""
    kind = type("PanicException", (BaseException,), {"__module__": "pyo3_runtime"})
    return kind(message)
