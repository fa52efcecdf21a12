# syntax=docker/dockerfile:1
# The controller image: the package and its locked dependencies in a virtualenv, on distroless's
# Python (Debian 13's python3.13 and the libraries it links: no shell, no package manager), run
# as a non-root user. Why this base, and what each part weighs: docs/benchmarks-image.md.
#
# The build stage is the official Python image of the same minor and Debian release, as
# distroless advises for its Python images: what it compiles (the byte code) and the wheels pip
# picks (cp313, glibc) hold for the final stage's Python.
FROM python:3.13-slim-trixie AS build
WORKDIR /src
# The dependencies exactly as locked: each pinned, each file checked against its hash
# (requirements.lock, `make lock`); then our wheel, whose dependencies the lock has already
# installed (--no-deps), and `pip check` to refuse a lock that does not satisfy them.
# The virtualenv is made from /usr/bin/python3, the final stage's interpreter path: the official
# image keeps its Python in /usr/local, so it gets a link there (Debian's own python3, the e2e
# lab's stand-in for this image, is there already). Then what the controller never runs leaves:
# the Kubernetes client's asyncio twin (kubernetes.aio, nothing imports it) and pip. And the
# Kubernetes client keeps its byte code only: its generated classes, for every API group, are
# half of the virtualenv in sources alone (compileall -b puts each module's .pyc where its .py
# was, which Python imports without the source; tracebacks inside it lose their source lines).
COPY requirements.lock pyproject.toml README.md ./
COPY controller ./controller
RUN if [ ! -e /usr/bin/python3 ]; then ln -s /usr/local/bin/python3 /usr/bin/python3; fi \
    && /usr/bin/python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip==25.3 \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps -r requirements.lock \
    && /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install --no-cache-dir --no-deps /wheels/*.whl \
    && /opt/venv/bin/pip check \
    && /opt/venv/bin/pip uninstall --yes --quiet pip \
    && k=/opt/venv/lib/python3.13/site-packages/kubernetes \
    && rm -rf "$k/aio" \
    && find "$k" -name __pycache__ -prune -exec rm -rf {} + \
    && /opt/venv/bin/python -m compileall -q -b -j 0 "$k" \
    && find "$k" -name '*.py' -delete

FROM gcr.io/distroless/python3-debian13:nonroot
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
# Owned by root, readable by all (0644 files, 0755 folders, as pip leaves them): whatever UID
# runs the image, in group 0 (OpenShift's arbitrary UIDs) or any other, reads it and can change
# none of it. The console scripts start with #!/opt/venv/bin/python: no shell needed.
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The base's non-root user, by number (a kubelet checks runAsNonRoot against a number); the
# chart fixes none, so a cluster that assigns UIDs (OpenShift) overrides it. The working
# directory is /, not the base's /home/nonroot (0700, 65532's): any UID may enter it.
USER 65532
WORKDIR /
EXPOSE 9443 9090 8080
ENTRYPOINT ["tekton-coscheduler"]
CMD ["run"]
