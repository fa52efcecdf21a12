"""Making a release: the image and the chart of one version, pushed to a registry
(`make release`); requirements.lock read as data (lock)."""
