"""LLM generation (`infermeter llm`): generation engines (llama.cpp, vLLM, transformers), GGUF levels, and serving
sweeps against OpenAI-compatible servers."""
