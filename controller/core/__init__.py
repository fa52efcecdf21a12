"""The pure core: what Tekton objects mean, policy, the balloon, the affinity term, admission
decisions, reconcile plans. Data in, data out: no API client, no clock read, no threads, no
logging. import-linter (pyproject.toml) keeps it so."""
