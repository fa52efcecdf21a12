# syntax=docker/dockerfile:1
# The controller image: the package installed from its wheel into a virtualenv, run as non-root.
# Base pinned by version; pin by digest too when your registry policy asks for it.
FROM python:3.11.14-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY controller ./controller
# Then what the controller never runs leaves the virtualenv: the Kubernetes client's asyncio
# twin (kubernetes.aio, nothing imports it: half the image), pip and setuptools.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --upgrade pip==25.3 \
    && /opt/venv/bin/pip wheel --no-cache-dir --no-deps --wheel-dir /wheels . \
    && /opt/venv/bin/pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /opt/venv/lib/python3*/site-packages/kubernetes/aio \
    && /opt/venv/bin/pip uninstall --yes --quiet pip setuptools

FROM python:3.11.14-slim-bookworm
LABEL org.opencontainers.image.title="tekton-coscheduler" \
      org.opencontainers.image.description="Puts every pod of a Tekton PipelineRun on one node" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
EXPOSE 9443 9090 8080
ENTRYPOINT ["tekton-coscheduler"]
CMD ["run"]
