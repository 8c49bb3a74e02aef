"""The per-call settings on HuggingFace's shared Rust tokenizer, kept as HuggingFace alone keeps them.

HF's `_encode_plus` sets the Rust tokenizer's truncation, padding and `encode_special_tokens` to
what the call asks and leaves them so. Our internal calls ask for other settings and fast-path
answers set none, so `SettingsGate` (one per Rust tokenizer, `gate_of`) admits HF calls together
only while they ask for the same settings, an internal group puts back what HF's last call left,
and a fast answer leaves what HF's call would have left (`answered`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from tokbackend._process.forking import after_fork_in_child, fork_safe_lock

# (truncation, padding, encode_special_tokens) as the Rust tokenizer reports them
Settings = tuple[Any, Any, bool]

# What a plain call leaves (no truncation, no padding, special tokens recognized).
PLAIN: Settings = (None, None, False)


_ANSWERED = "answered"  # the key of a fast answer's group: (_ANSWERED, the settings it leaves)


def read(rust: Any) -> Settings:
    """The settings the Rust tokenizer shows now."""
    return rust.truncation, rust.padding, rust.encode_special_tokens


def apply(rust: Any, settings: Settings) -> None:
    """Set what differs, as HF's `set_truncation_and_padding` does (so tokenizer.json is HF's)."""
    truncation, padding, encode_special_tokens = settings
    if rust.truncation != truncation:
        rust.no_truncation() if truncation is None else rust.enable_truncation(**_known(truncation, _TRUNCATION_KEYS))
    if rust.padding != padding:
        rust.no_padding() if padding is None else rust.enable_padding(**_known(padding, _PADDING_KEYS))
    if rust.encode_special_tokens != encode_special_tokens:
        rust.encode_special_tokens = encode_special_tokens


# What `enable_truncation` and `enable_padding` take: another tokenizers version may report more.
_TRUNCATION_KEYS = ("max_length", "stride", "strategy", "direction")
_PADDING_KEYS = ("length", "pad_to_multiple_of", "pad_id", "pad_token", "pad_type_id", "direction")


def _known(parameters: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {key: parameters[key] for key in keys if key in parameters}


class SettingsGate:
    """See the module docstring. Holds no reference to its Rust tokenizer (each call passes it)."""

    def __init__(self) -> None:
        self._open()
        # What HF's last user-visible call left, while an internal group runs (its snapshot).
        self.left: Settings | None = None
        # Whether a user's HF call through an accelerated object may have left settings that are
        # not PLAIN (read unlocked on every fast answer; set and cleared inside the gate).
        self.dirty = False

    def _open(self) -> None:
        """No call inside: at start, and in a child forked while other threads were inside."""
        self._condition = threading.Condition(threading.Lock())
        self._holders = 0
        self._waiting = 0
        self._key: Any = None
        self._internal = False
        self._owners = threading.local()  # how deep this thread is inside the gate

    def answered(self, rust: Any, settings: Settings) -> None:
        """A fast-path answer: leave on the Rust tokenizer the settings HF's call would have left."""
        if read(rust) == settings:
            if settings is PLAIN and self.dirty:
                with self._condition:
                    if self._holders == 0:
                        self.dirty = False
            return
        with self.entered(rust, (_ANSWERED, settings), internal=False):
            apply(rust, settings)

    @contextlib.contextmanager
    def entered(self, rust: Any, key: Any, internal: bool) -> Iterator[None]:
        """Around one HF `_encode_plus` asking for settings `key`; an internal call leaves the
        settings as HF's last user-visible call left them. A thread already inside just runs."""
        depth = getattr(self._owners, "depth", 0)
        if not depth:
            self._enter(rust, key, internal)
        self._owners.depth = depth + 1
        try:
            yield
        finally:
            self._owners.depth = depth
            if not depth:
                self._leave(rust)

    def _enter(self, rust: Any, key: Any, internal: bool) -> None:
        with self._condition:
            # a call waiting for other settings goes before new calls joining the running group
            if not (self._holders == 0 or (self._waiting == 0 and self._joins(key, internal))):
                self._waiting += 1
                while not (self._holders == 0 or self._joins(key, internal)):
                    self._condition.wait()
                self._waiting -= 1
            if self._holders == 0:
                self._key, self._internal = key, internal
                if internal and self.left is None:
                    self.left = read(rust)
            if not internal:  # a user's call leaves its own settings: PLAIN only where a fast answer's are
                self.dirty = key != (_ANSWERED, PLAIN)
            self._holders += 1

    def _joins(self, key: Any, internal: bool) -> bool:
        return internal == self._internal and key == self._key

    def _leave(self, rust: Any) -> None:
        with self._condition:
            if self._holders == 1:
                if self._internal and self.left is not None:
                    apply(rust, self.left)
                # a user's call leaves its own settings: now the ones HF's last call left
                self.left = None
            self._holders -= 1
            if self._holders == 0:
                self._condition.notify_all()


_registry_lock = fork_safe_lock(sys.modules[__name__], "_registry_lock")
# By the Rust tokenizer's id (it takes no weak reference), with the accelerated tokenizers that
# hold it: once none lives, the entry may go.
_gates: dict[int, tuple[SettingsGate, weakref.WeakSet[object]]] = {}


@after_fork_in_child
def _after_fork_in_child() -> None:
    for gate, _ in list(_gates.values()):
        gate._open()


def gate_of(rust: Any, owner: object) -> SettingsGate:
    """The one gate of a Rust tokenizer, however many accelerated objects (`owner`) share it."""
    with _registry_lock:
        for key in [key for key, (_, owners) in _gates.items() if not owners]:
            del _gates[key]
        gate, owners = _gates.setdefault(id(rust), (SettingsGate(), weakref.WeakSet()))
        owners.add(owner)
        return gate
