"""Benchmarks of agent-gateway, each against a direct call and a peer in the same run.

python -m bench peers             # the peer benchmark (table, JSON, plot)
python -m bench proxy-latency     # and the older single-purpose ones, also runnable as
python -m bench nested-hop        # `python bench/<name>.py`
python -m bench mcp-overhead
python -m bench engine-overhead
"""
