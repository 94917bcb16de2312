# syntax=docker/dockerfile:1
# Two images from one file:
#   default target (server): `loadmgr serve` and the simulated broker agent `loadmgr agent`;
#     no Java, no Spark; pyarrow only, for the history sink (the `history` extra).
#   --target spark: the long-term Spark job (`loadmgr longterm ...`) with a Java runtime and pyspark
#     (the `spark` extra); run it as a CronJob or hand service/longterm/job.py to spark-submit.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
ARG VERSION=0.1.0
# Where the image's source lives, for org.opencontainers.image.source (set it when publishing).
ARG SOURCE_URL=""
# The server's extras: history (pyarrow, the history sink). scipy (BalancedShedder's least-move
# planner, ~216 MB with numpy) is a core dependency and always installed.
ARG SERVER_EXTRAS=history

FROM ${PYTHON_IMAGE} AS source
WORKDIR /src
COPY pyproject.toml README.md ./
COPY balancer ./balancer
COPY service ./service

FROM source AS build
ARG SERVER_EXTRAS
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir ".[${SERVER_EXTRAS}]"

FROM source AS build-spark
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir '.[spark]'

FROM ${PYTHON_IMAGE} AS spark
ARG VERSION
ARG SOURCE_URL
LABEL org.opencontainers.image.title="loadmgr-spark" \
      org.opencontainers.image.description="loadmgr's long-term Spark job: history to longTermData in ZooKeeper" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}"
# Spark needs a JVM; Debian bookworm's headless Java 17 runtime is enough for local mode.
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless=17.0.* procps=2:4.0.* \
    && rm -rf /var/lib/apt/lists/*
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH \
    SPARK_LOCAL_IP=127.0.0.1
RUN groupadd --system --gid 10001 loadmgr \
    && useradd --system --uid 10001 --gid loadmgr --home-dir /var/lib/loadmgr --create-home loadmgr
COPY --from=build-spark /opt/venv /opt/venv
USER 10001
WORKDIR /var/lib/loadmgr
ENTRYPOINT ["loadmgr", "longterm"]
CMD ["--help"]

FROM ${PYTHON_IMAGE} AS server
ARG VERSION
ARG SOURCE_URL
LABEL org.opencontainers.image.title="loadmgr" \
      org.opencontainers.image.description="Live load manager for Apache-Pulsar-style broker clusters: REST API, Prometheus metrics" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE_URL}"
# Listening on 0.0.0.0, `loadmgr serve` refuses to start without an admin token: mount one as a
# secret file and set LOADMGR_API_TOKEN_FILE (never the token itself in ENV or argv). HTTPS:
# LOADMGR_HTTP_TLS_CERTFILE/KEYFILE (the HEALTHCHECK below then needs https). See docs/security.md.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PATH=/opt/venv/bin:$PATH \
    LOADMGR_HTTP_HOST=0.0.0.0 \
    LOADMGR_HTTP_PORT=8080 \
    LOADMGR_HISTORY_URI=/var/lib/loadmgr/history
RUN groupadd --system --gid 10001 loadmgr \
    && useradd --system --uid 10001 --gid loadmgr --home-dir /var/lib/loadmgr --create-home loadmgr
COPY --from=build /opt/venv /opt/venv
USER 10001
WORKDIR /var/lib/loadmgr
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
ENTRYPOINT ["loadmgr"]
CMD ["serve"]
