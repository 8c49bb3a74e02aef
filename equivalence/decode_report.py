"""Decode surface report (informational): how a backend's own decode differs from HF's.

It documents why decode, incremental detokenization and `skip_special_tokens` stay on
HuggingFace in tokbackend: a backend decode that returns raw bytes, or ignores special-token
flags, would change what a server streams to its clients.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class DecodeCase:
    name: str
    ids: list[int]
    hf: str
    backend: str

    @property
    def same(self) -> bool:
        return self.hf == self.backend


def decode_cases(hf_tokenizer, backend_decode) -> list[DecodeCase]:
    """Compare `backend_decode(ids) -> str` with HF's decode on the cases that matter when streaming."""
    text = "Hello 世界 <|im_end|> 🦊"
    ids = hf_tokenizer.encode(text, add_special_tokens=False)
    # A rare 4-byte character is split into byte tokens; its first token alone is partial UTF-8.
    rare = next(
        pieces
        for character in ("\U00013000", "\U0001d518", "\U0001f9ec", "\U00010400")
        if len(pieces := hf_tokenizer.encode(character, add_special_tokens=False)) > 1
    )
    cases = {
        "plain text with a special token": ids,
        "partial UTF-8 (first byte-token of a 4-byte character)": rare[:1],
        "empty": [],
    }
    results = [
        DecodeCase(name, case_ids, hf_tokenizer.decode(case_ids), backend_decode(case_ids))
        for name, case_ids in cases.items()
    ]
    skipped = hf_tokenizer.decode(ids, skip_special_tokens=True)
    results.append(DecodeCase("skip_special_tokens=True (backend has no such flag)", ids, skipped, backend_decode(ids)))
    return results


def gigatoken_decode(hf_tokenizer):
    """gigatoken's own decode (bytes), turned into str the way a naive adapter would."""
    import gigatoken

    backend = gigatoken.Tokenizer.from_json(hf_tokenizer.backend_tokenizer.to_str())
    return lambda ids: backend.decode(ids).decode("utf-8", errors="backslashreplace")
