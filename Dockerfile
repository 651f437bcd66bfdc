# One image for the control plane and the decision service (the command picks which):
#   control plane     gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'   (the default)
#   decision service  gunicorn -c python:decision.gunicorn_conf 'decision.wsgi:create()'
#   decision sidecar  python -m decision   (one process; gunicorn when IAMGATE_DECISION_WORKERS > 1)
# The config modules read IAMGATE_* (docs/configuration.md): a bad setting stops the
# container with exit 2 and one line. The image runs on MongoDB (IAMGATE_MONGODB_URI):
# the embedded memory:// store is a development extra it does not hold. Build with
# `make image`; docs/deployment.md, "Image", says how to push it and bump what is pinned.

# The base, pinned by digest so two builds start from the same bytes. To bump it, put
# the index digest (the multi-platform one) that
#   docker buildx imagetools inspect python:3.11-slim-bookworm
# prints on its "Digest:" line after the @ (docs/deployment.md, "Bumping what the image pins").
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
# Every package from the lockfiles, each checked against its hashes (`make lock` writes
# them from setup.cfg): two builds install the same files. The build tools stay in this
# stage; the runtime packages go to /install, then iamgate itself without dependencies.
COPY docker/build-requirements.lock docker/requirements.lock ./
RUN pip install --no-cache-dir --require-hashes -r build-requirements.lock \
 && pip install --no-cache-dir --require-hashes --ignore-installed --prefix=/install -r requirements.lock
COPY setup.cfg pyproject.toml README.md ./
COPY shared shared
COPY controlplane controlplane
COPY decision decision
RUN pip install --no-cache-dir --no-deps --no-build-isolation --prefix=/install .

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
# `make image` passes setup.cfg's version and the commit; SOURCE is where it is published.
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/iamgate/iamgate
LABEL org.opencontainers.image.title="iamgate" \
      org.opencontainers.image.description="Multi-tenant identity and access service: control plane and decision service" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.documentation="${SOURCE}/blob/main/docs/deployment.md" \
      org.opencontainers.image.base.name="docker.io/library/${PYTHON_IMAGE}"
RUN useradd --uid 10001 --create-home iamgate
COPY --from=build /install /usr/local
COPY docker/healthcheck.py /usr/local/lib/iamgate/healthcheck.py
USER 10001
WORKDIR /home/iamgate
# Listen on every interface inside the container; gunicorn's control socket is off and
# worker heartbeats go to /dev/shm (shared/serving.py), so a read-only root filesystem
# needs no writable directory.
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 IAMGATE_HOST=0.0.0.0 IAMGATE_DECISION_HOST=0.0.0.0
EXPOSE 8000 8181
# Liveness for plain Docker (Kubernetes uses the chart's probes instead): /healthz of
# whichever service this container runs. start-period covers the start-up step.
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "/usr/local/lib/iamgate/healthcheck.py"]
CMD ["gunicorn", "-c", "python:controlplane.gunicorn_conf", "controlplane.wsgi:create()"]
