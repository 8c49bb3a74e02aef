"""Type-checking consumers (grammar engines) accept the accelerated tokenizer and see HF's vocabulary."""

from __future__ import annotations

import gigatoken
import llguidance.hf
import xgrammar


def test_xgrammar_tokenizer_info_equals_hf(hf_tokenizer, fast_tokenizer):
    ours = xgrammar.TokenizerInfo.from_huggingface(fast_tokenizer)
    theirs = xgrammar.TokenizerInfo.from_huggingface(hf_tokenizer)
    assert ours.vocab_type == theirs.vocab_type
    assert ours.add_prefix_space == theirs.add_prefix_space
    assert ours.stop_token_ids == theirs.stop_token_ids == [hf_tokenizer.eos_token_id]
    assert ours.vocab_size == theirs.vocab_size == len(hf_tokenizer)
    assert ours.decoded_vocab == theirs.decoded_vocab


def test_xgrammar_compiles_a_json_schema_grammar(fast_tokenizer):
    info = xgrammar.TokenizerInfo.from_huggingface(fast_tokenizer)
    compiled = xgrammar.GrammarCompiler(info).compile_json_schema(
        '{"type": "object", "properties": {"a": {"type": "integer"}}}'
    )
    matcher = xgrammar.GrammarMatcher(compiled)
    assert matcher.accept_string('{"a": 1}')


def test_gigatokens_own_wrapper_is_what_xgrammar_rejects(hf_tokenizer):
    """Why the generated subclass exists: gigatoken's as_hf() object is not accepted."""
    try:
        xgrammar.TokenizerInfo.from_huggingface(gigatoken.Tokenizer(hf_tokenizer).as_hf())
    except Exception as error:
        assert "Unsupported tokenizer type" in str(error)
    else:
        raise AssertionError("xgrammar now accepts gigatoken's HFCompat; the comparison above no longer shows anything")


def test_llguidance_tokenizer_builds_with_hf_vocabulary(hf_tokenizer, fast_tokenizer):
    ours = llguidance.hf.from_tokenizer(fast_tokenizer)
    theirs = llguidance.hf.from_tokenizer(hf_tokenizer)
    assert ours.vocab_size == theirs.vocab_size
    assert ours.eos_token == theirs.eos_token
    sample = 'Hello <|im_end|> 毕老师 {"a": 1}'
    assert ours.tokenize_str(sample) == theirs.tokenize_str(sample)
