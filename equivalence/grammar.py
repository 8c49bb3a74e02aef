"""Grammar gate: a grammar engine must accept the accelerated tokenizer and behave as with HF.

Two checks, both of capability rather than configuration:
- `xgrammar.TokenizerInfo.from_huggingface` succeeds on the accelerated object and equals the
  one built from plain HuggingFace (vocabulary, vocab type, prefix-space flag, stop ids);
- a JSON-schema-constrained generation (ids sampled under xgrammar's token mask, decoded
  through the tokenizer) parses and conforms to the schema, and is the text the same seed
  gives through HF's own tokenizer. Where HF's own generation fails alike (xgrammar's grammar
  and a vocabulary it decodes otherwise than HF: seen on small trained byte-level vocabularies),
  the failure is xgrammar's, not the accelerated tokenizer's: it is reported apart (`alike`).
"""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 24},
        "kind": {"type": "string", "enum": ["tool_call", "answer", "思考"]},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    },
    "required": ["name", "kind", "count", "ok", "tags"],
    "additionalProperties": False,
}


@dataclasses.dataclass
class GrammarGateResult:
    tokenizer_info_equal: bool
    differences: list[str]
    generations: list[str]
    failures: list[str]
    # generations that fail with HF's own tokenizer just as with ours (not the backend's doing)
    alike: list[str] = dataclasses.field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.tokenizer_info_equal and not self.failures


def tokenizer_info_differences(ours, theirs) -> list[str]:
    """What differs between two `xgrammar.TokenizerInfo`s (empty when equal)."""
    differences = []
    for field in ("vocab_type", "add_prefix_space", "stop_token_ids", "vocab_size", "special_token_ids"):
        if getattr(ours, field) != getattr(theirs, field):
            differences.append(f"{field}: {getattr(ours, field)!r} != {getattr(theirs, field)!r}")
    if ours.decoded_vocab != theirs.decoded_vocab:
        differences.append("decoded_vocab differs")
    return differences


def conforms(value, schema: dict = SCHEMA) -> str | None:
    """None when `value` conforms to `schema` (the subset of JSON Schema used here), else why not."""
    kind = schema.get("type")
    checks = {"object": dict, "array": list, "string": str, "boolean": bool}
    if kind == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{value!r} is not an integer"
    elif not isinstance(value, checks[kind]):
        return f"{value!r} is not a {kind}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{value!r} not in {schema['enum']}"
    if kind == "string" and len(value) > schema.get("maxLength", len(value)):
        return f"{value!r} longer than {schema['maxLength']}"
    if kind == "array":
        if len(value) > schema.get("maxItems", len(value)):
            return f"array of {len(value)} items"
        return next((why for item in value if (why := conforms(item, schema["items"]))), None)
    if kind == "object":
        if set(value) != set(schema["required"]):
            return f"keys {sorted(value)} != {sorted(schema['required'])}"
        return next((why for key, item in value.items() if (why := conforms(item, schema["properties"][key]))), None)
    return None


def constrained_generation(tokenizer, info, compiled, seed: int, max_tokens: int = 400) -> str:
    """Sample ids under xgrammar's mask (`compiled` for `info`), decode them through `tokenizer`."""
    import xgrammar

    matcher = xgrammar.GrammarMatcher(compiled)
    bitmask = np.zeros((1, (info.vocab_size + 31) // 32), dtype=np.int32)
    stop_ids = set(info.stop_token_ids)
    rng = random.Random(seed)
    ids: list[int] = []
    for _ in range(max_tokens):
        matcher.fill_next_token_bitmask(bitmask)
        allowed = np.flatnonzero(np.unpackbits(bitmask.view(np.uint8), bitorder="little")[: info.vocab_size])
        stops = [token for token in allowed.tolist() if token in stop_ids]
        token = stops[0] if stops else int(allowed[rng.randrange(len(allowed))])
        if not matcher.accept_token(token):
            raise AssertionError(f"xgrammar rejected token {token} it had just allowed")
        if token in stop_ids:
            break
        ids.append(token)
    return tokenizer.decode(ids, skip_special_tokens=True)


def grammar_gate(accelerated, hf, generations: int = 5) -> GrammarGateResult:
    """Run both checks; `generations` seeded samples of the constrained generation, each also
    through HF's own tokenizer."""
    import xgrammar

    info, hf_info = (xgrammar.TokenizerInfo.from_huggingface(tokenizer) for tokenizer in (accelerated, hf))
    differences = tokenizer_info_differences(info, hf_info)
    compiled, hf_compiled = (
        xgrammar.GrammarCompiler(tokenizer_info).compile_json_schema(json.dumps(SCHEMA), any_whitespace=False)
        for tokenizer_info in (info, hf_info)
    )
    texts, failures, alike = [], [], []
    for seed in range(generations):
        text = constrained_generation(accelerated, info, compiled, seed)
        hf_text = constrained_generation(hf, hf_info, hf_compiled, seed)
        texts.append(text)
        why = _why_not_conforming(text)
        if why and text == hf_text:
            alike.append(f"seed {seed}: {text!r}: {why}")
        elif why:
            failures.append(f"seed {seed}: {text!r}: {why}")
        elif text != hf_text:
            failures.append(f"seed {seed}: {text!r} where HF's own tokenizer gives {hf_text!r}")
    return GrammarGateResult(not differences, differences, texts, failures, alike)


def _why_not_conforming(text: str) -> str | None:
    try:
        return conforms(json.loads(text))
    except json.JSONDecodeError as error:
        return f"not JSON: {error}"
