# kcompat as a drop-in for the apache/kafka image: `docker build -t kcompat .` then
# `docker run -p 127.0.0.1:9092:9092 kcompat` (see README, "Containers").
# Classic-builder compatible (no BuildKit-only syntax). BASE: any image with python3 (>= 3.11) and
# its venv module; the published image builds on python:3.12-slim.
ARG BASE=python:3.12-slim
FROM ${BASE}

# dependencies first (their layer is reused while only kcompat's code changes): the project's own
# metadata with an empty package, then the code without dependencies
RUN python3 -m venv /opt/kcompat
COPY pyproject.toml README.md /src/
RUN mkdir -p /src/kcompat && touch /src/kcompat/__init__.py \
    && /opt/kcompat/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && rm -rf /src
COPY pyproject.toml README.md /src/
COPY kcompat /src/kcompat
RUN /opt/kcompat/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps --force-reinstall /src \
    && rm -rf /src \
    && /opt/kcompat/bin/python -m compileall -q /opt/kcompat/lib

RUN useradd --user-group --uid 1000 --no-create-home --home-dir /var/lib/kcompat --shell /usr/sbin/nologin kcompat \
    && mkdir -p /var/lib/kcompat/data && chown -R kcompat:kcompat /var/lib/kcompat
USER kcompat
WORKDIR /var/lib/kcompat
ENV PATH=/opt/kcompat/bin:$PATH PYTHONUNBUFFERED=1
VOLUME /var/lib/kcompat/data
EXPOSE 9092 9093 8090
# a Kafka protocol round trip (ApiVersions) to the node's client listener, not just an open port
HEALTHCHECK --interval=2s --timeout=5s --start-period=30s --retries=3 CMD ["kcompat", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["kcompat", "container"]
