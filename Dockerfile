# syntax=docker/dockerfile:1
# loadmgr: the load-manager service (`loadmgr serve`) and the simulated broker agent (`loadmgr agent`).
# Java is needed only for the embedded ZooKeeper (`loadmgr demo`/`zookeeper`) and the Spark job.

FROM python:3.11.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY balancer ./balancer
COPY service ./service
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir .

FROM python:3.11.11-slim-bookworm
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
