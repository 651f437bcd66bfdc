# One image for the control plane and the decision service (the command picks which).
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
ENV PYTHONUNBUFFERED=1 IAMGATE_HOST=0.0.0.0
EXPOSE 8000 8181
CMD ["gunicorn", "--worker-class", "gevent", "--workers", "2", "--bind", "0.0.0.0:8000", "controlplane.wsgi:create()"]
