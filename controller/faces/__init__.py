"""What the outside world talks to: the kopf handlers (thin adapters), the HTTP servers
(admission, probes, metrics), `check`, logging set-up, and the wiring of the process (app)."""
