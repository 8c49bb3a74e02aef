"""Reading a tokenizer.json's small sections without parsing its vocabulary.

A large vocabulary takes seconds to parse; what start-up reads (normalizer, pre-tokenizer, added
tokens, post-processor) is a few kilobytes, written before the model section.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from typing import Any

_decoder = json.JSONDecoder()
_WHITESPACE = re.compile(r"[ \t\r\n]*")
_parse: Callable[[str], dict[str, Any]] = json.loads  # a tokenizer.json, or its model section, is an object


def _skip_whitespace(text: str, position: int) -> int:
    match = _WHITESPACE.match(text, position)
    return match.end() if match else position  # `*` matches at every position


def top_level_sections(tokenizer_json: str) -> dict[str, Any]:
    """Top-level values of a tokenizer.json, parsed, but a "model" section after the normalizer
    and pre-tokenizer (HF writes it last) as its raw text. Another layout is parsed in full.

    >>> top_level_sections('{"normalizer": null, "pre_tokenizer": null, "model": {"type": "BPE"}}')["model"]
    '{"type": "BPE"}'
    """
    sections: dict[str, Any] = {}
    position = _skip_whitespace(tokenizer_json, 0)
    if tokenizer_json[position : position + 1] != "{":
        return _parse(tokenizer_json)
    position += 1
    while True:
        position = _skip_whitespace(tokenizer_json, position)
        key, position = _decoder.raw_decode(tokenizer_json, position)
        position = _skip_whitespace(tokenizer_json, position)
        if not isinstance(key, str) or tokenizer_json[position : position + 1] != ":":
            return _parse(tokenizer_json)
        position = _skip_whitespace(tokenizer_json, position + 1)
        if key == "model" and {"normalizer", "pre_tokenizer"} <= sections.keys():
            rest = tokenizer_json[position:].rstrip()
            if not rest.endswith("}"):
                return _parse(tokenizer_json)
            sections[key] = rest[:-1].rstrip()
            return sections
        value, position = _decoder.raw_decode(tokenizer_json, position)
        sections[key] = value
        position = _skip_whitespace(tokenizer_json, position)
        separator = tokenizer_json[position : position + 1]
        if separator == "}":
            return sections
        if separator != ",":
            return _parse(tokenizer_json)
        position += 1


def does_nothing(component: dict[str, Any] | None) -> bool:
    """Whether a normalizer or pre-tokenizer section is absent or an empty Sequence."""
    if component is None:
        return True
    return component.get("type") == "Sequence" and not (component.get("normalizers") or component.get("pretokenizers"))


def model_head(sections: dict[str, Any], characters: int = 1000) -> str:
    """The first characters of the model section (its type and flags come before the vocabulary)."""
    model = sections.get("model")
    return (model if isinstance(model, str) else json.dumps(model, separators=(",", ":")))[:characters]


def model_settings(sections: dict[str, Any]) -> dict[str, Any]:
    """The model's fields but its vocabulary and merges, read from the text before the vocabulary
    where HF's serializer put them there.

    >>> model_settings({"model": '{"type":"BPE","dropout":null,"fuse_unk":false,"vocab":{"a":0},"merges":[]}'})
    {'type': 'BPE', 'dropout': None, 'fuse_unk': False}
    """
    model: Any = sections.get("model")
    if isinstance(model, str):
        head, found, _ = model.partition('"vocab"')
        if found:
            with contextlib.suppress(ValueError):  # fields after the vocabulary: parse it all
                return _parse(head.rstrip().rstrip(",") + "}")
        model = _parse(model)
    return {key: value for key, value in model.items() if key not in ("vocab", "merges")}


def without_truncation_and_padding(tokenizer_json: str) -> str:
    """The tokenizer.json with `truncation` and `padding` null, its vocabulary left unparsed."""
    sections = top_level_sections(tokenizer_json)
    if sections.get("truncation") is None and sections.get("padding") is None:
        return tokenizer_json
    sections["truncation"] = sections["padding"] = None
    model = sections.pop("model", None)
    parts = [
        f"{json.dumps(key)}:{json.dumps(value, ensure_ascii=False, separators=(',', ':'))}"
        for key, value in sections.items()
    ]
    if model is not None:
        parts.append('"model":' + (model if isinstance(model, str) else json.dumps(model, ensure_ascii=False)))
    return "{" + ",".join(parts) + "}"
