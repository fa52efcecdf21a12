"""Capacity: a run's peak, the reservation pod that finds room for it, quotas, what nodes can
hold."""
