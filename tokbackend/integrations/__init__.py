"""Integrations with serving stacks: SGLang (`tokbackend.integrations.sglang`) and vLLM
(`tokbackend.integrations.vllm`), each a plugin the server loads through its entry point."""

__all__: list[str] = []
