"""The second oracle: a vocabulary in which every pre-token boundary next to a non-ASCII
character shows in the ids.

The first oracle compares ids under the model's own vocabulary, where a moved pre-token
boundary only shows if the model happens to have a merge across it. This one keeps the
model's normalizer and pre-tokenizer (so the backend recognises them) and swaps in a
byte-level BPE vocabulary whose only merges join a character's edge bytes to its neighbours:

- (ASCII byte, UTF-8 lead byte): an ASCII character, then a non-ASCII one;
- (UTF-8 continuation byte, ASCII byte): a non-ASCII character, then an ASCII one;
- (continuation byte, lead byte): two non-ASCII characters in a row.

Two such merges never share a byte (a non-ASCII character is at least two bytes long), so each
boundary next to a non-ASCII character is seen on its own: the pair merges exactly when both
characters are in one pre-token. The remaining single-byte ids spell out the normalized text,
so a normalizer difference (composition, reordering) shows too. A code point on which the
two engines draw different boundaries or normalize differently gives different ids here,
whatever the model's real merges are.

Applies to byte-level BPE tokenizers (GPT-2 style byte mapping), which is what the built-in
and most current LLM tokenizers are; for others the first oracle alone derives the guard.
"""

from __future__ import annotations

import json
from typing import Any

from tokbackend._tokenizer_json import model_settings, top_level_sections

_LEAD_BYTES = range(0xC2, 0xF5)
_CONTINUATION_BYTES = range(0x80, 0xC0)
_ASCII_BYTES = range(0x80)


def _is_byte_level(spec: dict[str, Any]) -> bool:
    def has_byte_level(node: object) -> bool:
        if not isinstance(node, dict):
            return False
        return node.get("type") == "ByteLevel" or any(has_byte_level(child) for child in node.get("pretokenizers", []) or [])

    return (spec.get("model") or {}).get("type") == "BPE" and has_byte_level(spec.get("pre_tokenizer"))


def boundary_tokenizer_json(tokenizer_json: str) -> str | None:
    """The model's tokenizer.json with the boundary-revealing vocabulary, or None when the
    model is not byte-level BPE (the oracle does not apply). The model's own vocabulary is never
    parsed (a 248k-token one takes ~1 s and ~300 MB)."""
    sections = top_level_sections(tokenizer_json)
    spec = {**sections, "model": model_settings(sections)}
    if not _is_byte_level(spec):
        return None
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    mapping: dict[int, str] = bytes_to_unicode()  # type: ignore[no-untyped-call]  # untyped; GPT-2's byte map, as ByteLevel uses
    vocab = {mapping[byte]: byte for byte in range(256)}
    merges: list[list[str]] = []

    def merge(first: int, second: int) -> None:
        vocab[mapping[first] + mapping[second]] = len(vocab)
        merges.append([mapping[first], mapping[second]])

    for ascii_byte in _ASCII_BYTES:
        for lead in _LEAD_BYTES:
            merge(ascii_byte, lead)
    for continuation in _CONTINUATION_BYTES:
        for ascii_byte in _ASCII_BYTES:
            merge(continuation, ascii_byte)
        for lead in _LEAD_BYTES:
            merge(continuation, lead)
    spec["model"] = {**spec["model"], "vocab": vocab, "merges": merges, "ignore_merges": False, "byte_fallback": False}
    spec["added_tokens"] = []
    spec["post_processor"] = None
    return json.dumps(spec, ensure_ascii=False)
