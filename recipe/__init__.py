"""recipe: OpenAI / Anthropic API traffic <-> DeepSeek-V4 prompt token ids and output events."""
