"""MCP servers for the toolkit tests: small in-process SDK servers, and helpers that find and
start the real servers `.ci/install-servers` puts in `<repo>/.servers/`."""
