# One image for the control plane and the decision service (the command picks which):
#   control plane     gunicorn -c python:controlplane.gunicorn_conf 'controlplane.wsgi:create()'   (the default)
#   decision service  gunicorn -c python:decision.gunicorn_conf 'decision.wsgi:create()'
#   decision sidecar  python -m decision   (one process; gunicorn when IAMGATE_DECISION_WORKERS > 1)
# The config modules read IAMGATE_* (docs/configuration.md): a bad setting stops the
# container with exit 2 and one line; on memory:// the control plane runs one worker
# (the embedded store lives inside one process) and says so, on mongodb:// it runs
# IAMGATE_WORKERS. Build with `make image`; docs/deployment.md says how to push it.
FROM python:3.11-slim AS build
WORKDIR /src
COPY setup.cfg pyproject.toml README.md ./
COPY shared shared
COPY controlplane controlplane
COPY decision decision
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
RUN useradd --uid 10001 --create-home iamgate
COPY --from=build /install /usr/local
USER 10001
WORKDIR /home/iamgate
# Listen on every interface inside the container; gunicorn's control socket is off and
# worker heartbeats go to /dev/shm (shared/serving.py), so a read-only root filesystem
# needs no writable directory.
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 IAMGATE_HOST=0.0.0.0 IAMGATE_DECISION_HOST=0.0.0.0
EXPOSE 8000 8181
CMD ["gunicorn", "-c", "python:controlplane.gunicorn_conf", "controlplane.wsgi:create()"]
