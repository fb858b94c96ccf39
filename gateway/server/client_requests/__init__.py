"""Requests to our own client: a node's server asking during a proxied call (sampling,
elicitation, roots; `ask_client`), at once on handshake-era connections and across rounds for
2026-07-28 clients (`parked_calls`); an agent on the client's model resumed round after round
from its sealed state (`run_rounds`)."""
