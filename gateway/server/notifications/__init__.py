"""What the server tells its clients unasked: a run's progress and log messages
(`run_progress`), a node's server's log messages (`log_messages`), and that the proxied lists
changed (`list_changes`)."""
