"""tokbackend's Prometheus metrics (docs/metrics.md) on SGLang's own /metrics route, in multiprocess
mode as `--enable-metrics` sets it up: real SGLang code, on the CPU."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from prometheus_client.parser import text_string_to_metric_families  # requirements-X.txt pins it

# A fresh interpreter in SGLang's order: the plugins are imported (tokbackend with them), then
# `--enable-metrics` sets PROMETHEUS_MULTIPROC_DIR, then the tokenizer is loaded; /metrics is
# SGLang's app over its multiprocess registry. prometheus_client chooses multiprocess mode once,
# as it is imported, so this cannot run in the test process.
_SERVER = textwrap.dedent(
    """
    import sys
    from sglang.srt.plugins import load_plugins
    load_plugins()
    from sglang.srt.utils import add_prometheus_middleware, set_prometheus_multiproc_dir
    set_prometheus_multiproc_dir()
    from sglang.srt.utils.hf_transformers.tokenizer import get_tokenizer
    tokenizer = get_tokenizer(sys.argv[1], tokenizer_backend="tokbackend-fastokens")
    tokenizer.encode("Hello! 1 + 1 = 2")
    tokenizer(["one", "two"])
    tokenizer("a question", "its pair")
    from fastapi import FastAPI
    from fastapi.testclient import TestClient
    app = FastAPI()
    add_prometheus_middleware(app)
    print(TestClient(app).get("/metrics").text)
    """
)


def test_sglangs_metrics_route_serves_tokbackends_counters_in_multiprocess_mode(model_dir):
    done = subprocess.run(
        [sys.executable, "-c", _SERVER, model_dir], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr
    values = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(done.stdout)
        for sample in family.samples
    }
    assert values[("tokbackend_fast_texts_total", ())] == 1 + 2
    assert values[("tokbackend_fallback_texts_total", (("reason", "text_pair"),))] == 1
    assert values[("tokbackend_builds_total", (("backend", "fastokens"), ("outcome", "served")))] == 1
    assert values[("tokbackend_encode_seconds_count", (("path", "fast"),))] == 2
    assert values[("tokbackend_encode_seconds_count", (("path", "hf"),))] == 1
