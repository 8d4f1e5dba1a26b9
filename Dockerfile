# The image the Helm chart (helm/wow-temporal) runs: `wow-temporal worker` by default,
# `wow-temporal api ...` for the control API.
#
#   docker build -t wow-temporal:0.1.0 .
#
# Your domain's App (`--app module:attr`) is not part of wow-temporal: build FROM this image
# and `COPY` its package into /app (on PYTHONPATH), or `pip install` it.

# --- build: the wheel, and nothing of the build tools goes further ---------------------------
FROM python:3.11-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY wow_temporal ./wow_temporal
RUN pip wheel --no-deps --wheel-dir /dist .

# --- runtime: the wheel and its runtime dependencies only (no dev or testing extras) ---------
# With the otlp extra (the OTLP/HTTP span exporter), so wow.telemetry.otlp-endpoint works as is,
# and the postgres extra (psycopg's binary build: no libpq needed), so `host --db postgresql://…`.
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONPATH=/app
COPY --from=build /dist/ /tmp/dist/
RUN pip install "$(ls /tmp/dist/*.whl)[otlp,postgres]" \
    && rm -rf /tmp/dist \
    && groupadd --system --gid 10001 wow \
    && useradd --system --uid 10001 --gid wow --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin wow \
    && mkdir -p /app /etc/wow-temporal
WORKDIR /app
# Numeric, so Kubernetes can check runAsNonRoot without resolving the name.
USER 10001:10001
# The worker's health (/livez, /readyz) and metrics ports, and the control API's and its metrics.
EXPOSE 8081 9464 8088 9465 8089 9466
ENTRYPOINT ["wow-temporal"]
CMD ["worker"]
