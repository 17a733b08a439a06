"""memsvc: a memory service for LLM agents."""
