"""The operator: reconciling runs, placing anchors, reporting (Events, status). It takes
decisions from the core and makes them happen through kube; it knows nothing of kopf or HTTP."""
