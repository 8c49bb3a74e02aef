"""Integrations with serving stacks (SGLang; vLLM next)."""
