"""The plain install, as a serving user meets it first (run by `.ci/run`, not by pytest).

`.ci/run` installs the built wheel alone into a fresh venv (no test tools, no torch) and runs
this script from outside the source tree. It checks what users do first:

- the install pulled no torch, CUDA or test tools, and tokbackend imports from site-packages;
- a built-in model is served by the backend;
- a pipeline no shipped record covers (Qwen3's vocabulary under a split regex of its own) is
  served exactly, with its guard derived here before `accelerate()` returns
  (`stats()["start_up"]["phase"]` "final": the wheel once lacked the file every derivation reads);
- `tokbackend guard DIR` derives and writes a record for that pipeline;
- `tokbackend verify --quick` without the `[verify]` extra exits 5 and names the extra;
- the SGLang and vLLM plugin entry points resolve to the installed package.

Usage: python tests/plain_install.py   (exits non-zero with the failed check)
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from importlib.metadata import distributions, entry_points
from importlib.util import find_spec
from pathlib import Path

SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"]).resolve()
TEXTS = [
    "Hello!",
    "Ready? 毕老师说：naïve café, Привет, 🤖 1234567",
    "e\u0301 ſ's combining marks",
    "<|im_start|>user\nhi<|im_end|>",
]


def check(condition: bool, what: str) -> None:
    if not condition:
        sys.exit(f"plain install: FAILED: {what}")
    print(f"plain install: ok: {what}")


def installed_here(module: str) -> bool:
    spec = find_spec(module)
    return spec is not None and spec.origin is not None and Path(spec.origin).resolve().is_relative_to(SITE_PACKAGES)


def unseen_pipeline(directory: Path):
    """A pipeline no shipped record covers (`own_pipeline_model`), loaded as the issue saw it:
    `PreTrainedTokenizerFast` of its tokenizer.json."""
    from transformers import PreTrainedTokenizerFast

    from tokbackend.equivalence.server_models import own_pipeline_model

    return PreTrainedTokenizerFast(tokenizer_file=str(own_pipeline_model(directory) / "tokenizer.json"))


def main() -> None:
    heavy = sorted(
        name
        for name in (dist.metadata["Name"].lower() for dist in distributions())
        if name in {"torch", "triton", "xgrammar", "hypothesis", "faker", "pytest"}
        or name.startswith(("nvidia-", "cuda-"))
    )
    check(not heavy, f"the plain install pulled no torch, CUDA or test tools (found: {heavy})")
    check(
        installed_here("tokbackend") and installed_here("tokbackend.equivalence"),
        f"tokbackend imports from {SITE_PACKAGES}",
    )

    import tokbackend

    tokenizer = tokbackend.load("qwen3.6")
    check(tokenizer.encode("Hello!") == [9419, 0], "the built-in qwen3.6 encodes 'Hello!' as [9419, 0]")
    check(tokenizer.tokbackend.stats()["fast_texts"] == 1, "the backend answered it")

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        # an empty cache, as on a fresh replica (the records shipped in the wheel stay in the search path)
        os.environ["TOKBACKEND_CACHE_DIR"] = str(scratch / "cache")
        (scratch / "model").mkdir()
        hf = unseen_pipeline(scratch / "model")
        for backend in ("auto", "gigatoken", "fastokens"):
            fast = tokbackend.accelerate(hf, backend)
            expected_ids = [hf.encode(text) for text in TEXTS]
            check([fast.encode(text) for text in TEXTS] == expected_ids, f"{backend}: ids equal HF's")
            stats = fast.tokbackend.stats()
            check(
                stats["start_up"]["phase"] == "final", f"{backend}: the start-up build is final ({stats['start_up']})"
            )
            # derived by this process (or, after the first, read back from the cache it wrote)
            check(str(scratch / "cache") in stats["guard"], f"{backend}: guard {stats['guard']!r}")
            served_by = stats["backend"]
            expected = served_by != "hf" if backend == "auto" else served_by == backend
            check(stats["fast_texts"] > 0 and expected, f"{backend}: served by {served_by}")

        hf.save_pretrained(scratch / "saved")
        guard = run("guard", str(scratch / "saved"), "--output", str(scratch / "records"))
        check(guard.returncode == 0, f"tokbackend guard exits 0 ({guard.stderr[-500:]})")
        check(any((scratch / "records").glob("gigatoken-*.json")), "tokbackend guard wrote a gigatoken record")

    verify = run("verify", "qwen3.6", "--quick")
    names_extra = verify.returncode == 5 and "tokbackend[verify]" in verify.stderr
    check(names_extra, f"verify --quick names the missing extra (exit {verify.returncode})")
    version = run("--version")
    check(
        version.stdout.strip() == f"tokbackend {tokbackend.__version__}",
        f"tokbackend --version: {version.stdout.strip()}",
    )

    for group in ("sglang.srt.plugins", "vllm.general_plugins"):
        (plugin,) = [point for point in entry_points(group=group) if point.name == "tokbackend"]
        resolves = installed_here(plugin.module) and callable(plugin.load())
        check(resolves, f"{group} entry point {plugin.value} is the installed one")
    print("plain install: every check passed")


def run(*arguments: str) -> subprocess.CompletedProcess:
    command = [str(Path(sys.executable).parent / "tokbackend"), *arguments]
    return subprocess.run(command, capture_output=True, text=True, timeout=900, check=False)


if __name__ == "__main__":
    main()
