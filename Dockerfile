# regimetune: the service, the reference backend, the CLI and the Dask workers, in one image.
#   docker build -t regimetune .      (docker compose up builds it too)
# Build stage: a virtual environment with regimetune and its deployment extras (PostgreSQL
# driver, Dask); the runtime stage copies only that environment, so no pip or build cache ships.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/regimetune
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN /opt/regimetune/bin/pip install ".[deploy]"

FROM python:3.11-slim
ENV PATH=/opt/regimetune/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NUMBA_CACHE_DIR=/opt/regimetune/numba \
    MPLCONFIGDIR=/tmp/matplotlib
# A non-root user owning the state directory; the volumes mounted below it (backend state,
# demo traces, uploads) take its ownership when Docker creates them.
RUN useradd --system --uid 10001 --home-dir /var/lib/regimetune --create-home regimetune \
    && mkdir -p /var/lib/regimetune/backend /var/lib/regimetune/demo /var/lib/regimetune/uploads \
    && chown -R regimetune:regimetune /var/lib/regimetune
COPY --from=build /opt/regimetune /opt/regimetune
# The numba kernels, compiled into the image by the user that runs it, into a cache it owns:
# numba uses a cache directory only if it can write there (it tries), so a cache compiled by
# root would be passed over and every container would compile its own on its first window.
# numba keys its cache on the CPU model too: for hosts with another CPU than the one that
# builds the image, add NUMBA_CPU_NAME=generic to the ENV above (portable code, compiled once).
COPY deploy/warm-up.sh /opt/regimetune/warm-up.sh
RUN install -d -o regimetune -g regimetune /opt/regimetune/numba
USER regimetune
RUN sh /opt/regimetune/warm-up.sh
WORKDIR /var/lib/regimetune
EXPOSE 8080
# Ready once the store answers and the engine runs; the image has no curl, Python asks.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=4)"]
ENTRYPOINT ["regimetune"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
