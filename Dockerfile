# syntax=docker/dockerfile:1
# The controller image: the package installed from its wheel into a virtualenv, run as non-root.
# Base pinned by version; pin by digest too when your registry policy asks for it.
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
# The dependencies exactly as locked: each pinned, each file checked against its hash
# (requirements.lock, `make lock`); then our wheel, whose dependencies the lock has already
# installed (--no-deps), and `pip check` to refuse a lock that does not satisfy them.
# Then what the controller never runs leaves the virtualenv: the Kubernetes client's asyncio
# twin (kubernetes.aio, nothing imports it: half the image), pip and setuptools.
COPY requirements.lock pyproject.toml README.md ./
COPY controller ./controller
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip==25.3 \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock \
    && /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/*.whl \
    && /opt/venv/bin/pip check \
    && rm -rf /opt/venv/lib/python3*/site-packages/kubernetes/aio \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools

FROM python:3.11.14-slim-bookworm
# The OCI labels: `make release` (release/__main__.py) passes each; a plain build says "unknown"
# where only a release knows (the version, commit and time).
ARG OCI_SOURCE=https://tekton-coscheduler.dev
ARG OCI_VERSION=unknown
ARG OCI_REVISION=unknown
ARG OCI_CREATED=unknown
ARG OCI_LICENSES=Apache-2.0
ARG OCI_TITLE=tekton-coscheduler
ARG OCI_DESCRIPTION="Puts every pod of a Tekton PipelineRun on one node"
LABEL org.opencontainers.image.source="${OCI_SOURCE}" \
      org.opencontainers.image.version="${OCI_VERSION}" \
      org.opencontainers.image.revision="${OCI_REVISION}" \
      org.opencontainers.image.created="${OCI_CREATED}" \
      org.opencontainers.image.licenses="${OCI_LICENSES}" \
      org.opencontainers.image.title="${OCI_TITLE}" \
      org.opencontainers.image.description="${OCI_DESCRIPTION}"
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 9443 9090 8080
ENTRYPOINT ["tekton-coscheduler"]
CMD ["run"]
