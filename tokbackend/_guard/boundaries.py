"""The "boundaries" oracle: a vocabulary in which every pre-token boundary next to a non-ASCII
character shows in the ids, whatever the model's real merges are (byte-level BPE tokenizers only).

It keeps the model's normalizer and pre-tokenizer and swaps in a BPE vocabulary whose only merges
join a non-ASCII character's edge bytes to its neighbours' within one pre-token.
"""

from __future__ import annotations

import json

from tokbackend._guard.contexts import pipeline_steps
from tokbackend._tokenizer_json import model_settings, top_level_sections

_LEAD_BYTES = range(0xC2, 0xF5)
_CONTINUATION_BYTES = range(0x80, 0xC0)
_ASCII_BYTES = range(0x80)


def boundary_tokenizer_json(tokenizer_json: str) -> str | None:
    """The tokenizer.json with the boundary-revealing vocabulary, or None where the model is
    not byte-level BPE."""
    sections = top_level_sections(tokenizer_json)
    spec = {**sections, "model": model_settings(sections)}
    steps = pipeline_steps(spec, "pre_tokenizer")
    if (spec.get("model") or {}).get("type") != "BPE" or not any(step.get("type") == "ByteLevel" for step in steps):
        return None
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    mapping: dict[int, str] = bytes_to_unicode()  # type: ignore[no-untyped-call]  # untyped; GPT-2's byte map, as ByteLevel uses
    vocab = {mapping[byte]: byte for byte in range(256)}
    # an ASCII byte then a lead byte; a continuation byte then an ASCII or a lead byte (in this
    # order: their ranks)
    pairs = [(ascii_byte, lead) for ascii_byte in _ASCII_BYTES for lead in _LEAD_BYTES]
    pairs += [(continuation, byte) for continuation in _CONTINUATION_BYTES for byte in (*_ASCII_BYTES, *_LEAD_BYTES)]
    merges = [[mapping[first], mapping[second]] for first, second in pairs]
    vocab.update({first + second: 256 + rank for rank, (first, second) in enumerate(merges)})
    spec["model"] = {**spec["model"], "vocab": vocab, "merges": merges, "ignore_merges": False, "byte_fallback": False}
    spec["added_tokens"] = []
    spec["post_processor"] = None
    return json.dumps(spec, ensure_ascii=False)
