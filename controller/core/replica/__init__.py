"""What one replica does for itself: its Lease, its drain, its work queue's backoff, counting
its API calls, glancing at a watch event before decoding it."""
