"""How the server is reached: stdio, streamable HTTP (its sessions, Host/Origin checks, the
JSON-RPC envelope check), and who may call over HTTP (static tokens, OAuth, scope challenges)."""
