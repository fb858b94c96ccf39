"""What the server serves: the agents as tools (`agents`), and the exposed nodes' tools,
prompts, resources and resource subscriptions (`proxied_*`, `resource_subscriptions`), relayed
as the nodes' servers answer them (`relaying`)."""
