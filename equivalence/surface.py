"""What a `BatchEncoding` offers beyond its ids, read the same way from two results.

HuggingFace's result of a fast tokenizer carries `tokenizers.Encoding`s: `is_fast`,
`n_sequences`, `encodings`, `enc[0]`, and the token/word/character mappings. `surface(result)`
reads all of it into plain data, so the accelerated tokenizer's result can be compared with
HF's field by field (a field that raises is read as the exception's class name).
"""

from __future__ import annotations

from typing import Any

_ENCODING_FIELDS = (
    "ids",
    "type_ids",
    "tokens",
    "offsets",
    "attention_mask",
    "special_tokens_mask",
    "word_ids",
    "sequence_ids",
)


def _read(read) -> Any:
    try:
        return read()
    except Exception as error:  # noqa: BLE001 - what raises is part of the surface
        return f"raises {type(error).__name__}"


def surface(result) -> dict[str, Any]:
    """Every field of a BatchEncoding that a consumer can read, as plain data."""
    batch = result["input_ids"] and isinstance(result["input_ids"][0], list)
    rows = range(len(result["input_ids"])) if batch else range(1)
    fields: dict[str, Any] = {
        "type": type(result).__name__,
        "data": {key: value for key, value in result.items()},
        "is_fast": result.is_fast,
        "n_sequences": _read(lambda: result.n_sequences),
        "encodings": _read(lambda: None if result.encodings is None else len(result.encodings)),
    }
    for row in rows:
        fields[f"{row}:tokens"] = _read(lambda row=row: result.tokens(row))
        fields[f"{row}:word_ids"] = _read(lambda row=row: result.word_ids(row))
        fields[f"{row}:sequence_ids"] = _read(lambda row=row: result.sequence_ids(row))
        fields[f"{row}:char_to_token"] = _read(lambda row=row: [result.char_to_token(row, index) for index in range(4)])
        fields[f"{row}:token_to_chars"] = _read(lambda row=row: tuple(result.token_to_chars(row, 0)))
        fields[f"{row}:word_to_tokens"] = _read(lambda row=row: tuple(result.word_to_tokens(row, 0)))
        for name in _ENCODING_FIELDS:
            fields[f"{row}:encoding.{name}"] = _read(lambda row=row, name=name: getattr(result[row], name))
    fields["slice"] = _read(lambda: [encoding.ids for encoding in result[0:1]])
    return fields
