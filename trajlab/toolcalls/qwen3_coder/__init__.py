"""Parts of the qwen3_coder reader (the format class is in format_qwen3_coder.py)."""
