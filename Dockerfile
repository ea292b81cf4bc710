# The Headwater image: brokers (`headwater broker`), the operator (`headwater operator`), the
# console (`headwater console`) and the command-line clients.  Two stages: the first builds
# wheels of the source tree and of every dependency; the final one installs them offline,
# so no compiler, build frontend or source tree ends up in the image, and it runs as an
# unprivileged user (uid 10001, which the Helm chart's securityContext expects).
#
#   docker build -t headwater:0.1.0 .
#   docker build --build-arg PYTHON_IMAGE=local/python:3.11-slim-bookworm -t headwater:0.1.0 .
#
# It needs BuildKit (the default builder since Docker 23; DOCKER_BUILDKIT=1 before) for
# RUN --mount.  There is no `# syntax=` line on purpose: the builder's own Dockerfile frontend
# suffices, so building needs no registry beyond the base image (air-gapped builds work with
# a locally made base, e.g. the debootstrap one of scripts/k8s/images.sh).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# The wheel needs only the packaging metadata and the package folders (the generated
# gRPC code is committed under node/headwater/v1, so no protoc runs here).
COPY pyproject.toml README.md ./
COPY node ./node
COPY operator ./operator
COPY spark ./spark
# headwater.records._speedups (the native record codec) and headwater.client.producer._native
# (the producer's send path) are C extensions: the build
# stage needs a compiler; the final stage gets only the built wheel.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*
RUN python -m pip wheel --wheel-dir /wheels ".[operator,console]"

FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="headwater" \
      org.opencontainers.image.description="A Kafka-style distributed commit log in Python that runs on Kubernetes" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Headwater" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN groupadd --system --gid 10001 headwater \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/headwater --no-create-home \
        --shell /usr/sbin/nologin headwater \
 && mkdir -p /var/lib/headwater /etc/headwater \
 && chown 10001:10001 /var/lib/headwater /etc/headwater
# Install from the first stage's wheels only (--no-index): what was built is what ships.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m pip install --no-index --find-links=/wheels "headwater[operator,console]" \
 && headwater --version
USER 10001:10001
WORKDIR /var/lib/headwater
# 9092 gRPC (CLIENT) listener, 9091 INTERNAL listener (the chart's TLS), 9093 Kafka's
# protocol (the chart's kafka.port), 9404 broker metrics, 9405 operator metrics, 8080
# operator liveness.
EXPOSE 9091 9092 9093 9404 9405 8080
ENTRYPOINT ["headwater"]
CMD ["--help"]
