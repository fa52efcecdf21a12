"""Kubernetes I/O: the only code that talks to the API server. The client, the watch caches
(reflectors and the cluster view built on them), leader election, and the access list the chart
grants. It decides nothing about runs: it fetches, watches and writes for the layers above."""
