# The tuneplane server: the dashboard, the API and ingestion, SQLite in the /data volume by
# default, PostgreSQL with TUNEPLANE_DATABASE_URL (docs/deploy.md). Build: docker build -t tuneplane .
FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY tuneplane ./tuneplane
# A virtual environment of its own, copied whole into the image below: no compiler, pip
# cache or source tree in the image that runs.
RUN python -m venv /opt/tuneplane \
    && /opt/tuneplane/bin/pip install --no-cache-dir --disable-pip-version-check '.[server,postgres,s3]'

FROM python:3.12-slim
COPY --from=build /opt/tuneplane /opt/tuneplane
RUN useradd --system --uid 10001 --user-group --home-dir /data --no-create-home tuneplane \
    && mkdir /data && chown tuneplane:tuneplane /data
ENV PATH=/opt/tuneplane/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TUNEPLANE_DIR=/data \
    TUNEPLANE_HOST=0.0.0.0 \
    TUNEPLANE_PORT=8000
USER tuneplane
WORKDIR /data
# The database (SQLite's tuneplane.db), admin.key and trajectory bodies, unless
# TUNEPLANE_DATABASE_URL and TUNEPLANE_BLOB_URL send them elsewhere.
VOLUME ["/data"]
EXPOSE 8000
# /healthz answers 200 once the database answers (503 naming it when it does not), with or
# without TUNEPLANE_ROOT_PATH; the slim image has no curl, its Python asks instead.
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen(f'http://127.0.0.1:{os.environ.get(\"TUNEPLANE_PORT\", \"8000\")}/healthz', timeout=4)"
CMD ["tuneplane", "serve", "--host", "0.0.0.0"]
