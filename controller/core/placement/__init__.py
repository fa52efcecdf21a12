"""Placement: the balloon and its decision, the anchor and where it goes (warm included), the
gates, the marks, pods that wait, the budgets."""
