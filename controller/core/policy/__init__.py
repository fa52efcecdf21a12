"""Policy: a namespace's effective CoschedulingPolicy, and the status it should carry."""
