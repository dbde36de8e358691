"""The qwen3_coder reader in parts: lexer, tag text inside values, issue recording, simple calls, state machine.

The format class that puts them together (and renders calls) is
:class:`trajlab.toolcalls.format_qwen3_coder.Qwen3CoderFormat`, in the ``format_<name>`` module the format
registry loads. This package exports nothing itself: import from its modules.
"""
