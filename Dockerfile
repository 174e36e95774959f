# Apus in containers, for docker-compose.yml (a multi-node cluster on one host) or your own.
#
#   docker build -t apus .                        # builds Apus from this checkout (default)
#   docker build --target prebuilt --build-arg APUS_BIN=build/bin -t apus .
#                                                 # the programs of a host build instead
#   docker build --target prometheus -t apus-prometheus .
#
# The stages are ordered for Docker's classic builder too, which builds every stage before the
# target: `prometheus` and `prebuilt` come before the compile.
# BASE_IMAGE is any Debian 12 image; without a registry, scripts/docker-base makes one with
# debootstrap. Package installs go to Debian's mirror: build with `--network host` where the
# default bridge has no way out.
ARG BASE_IMAGE=debian:bookworm-slim

# What every Apus container runs with: the shared libraries of the programs, the samples and
# scripts (scripts/compose-setup writes a cluster's configs from the samples), memcached and
# HAProxy for the cluster's front, and curl for health checks.
FROM ${BASE_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libarchive13 libboost-container1.81.0 libboost-json1.81.0 libboost-system1.81.0 \
      libboost-url1.81.0 libgflags2.2 libisal2 liblz4-1 libprometheus-cpp-core1.0 \
      libpugixml1v5 librocksdb7.8 libsnappy1v5 libsqlite3-0 libssl3 libzstd1 \
      python3-minimal memcached haproxy curl procps rsync ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY etc /opt/apus/etc
COPY scripts /opt/apus/scripts
ENV PATH=/opt/apus/bin:/opt/apus/scripts:$PATH

# Prometheus, scraping each server's /metrics (docker-compose.yml).
FROM runtime AS prometheus
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/*

# The programs of a build made elsewhere: --build-arg APUS_BIN=<dir in the context>
# (tests/deploy uses its own build: no second compile). apus-init comes from scripts/ as well,
# which also keeps this COPY valid where the context has no such directory (the classic
# builder builds every stage before the target, this one too).
FROM runtime AS prebuilt
ARG APUS_BIN=build/bin
COPY scripts/apus-init ${APUS_BIN}/apus-* /opt/apus/bin/

# Compiles Apus (Release, no tests) with the toolchain scripts/install-deps names.
FROM runtime AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      clang-14 lld-14 cmake ninja-build pkg-config libboost1.81-dev libboost-system1.81-dev \
      libboost-json1.81-dev libboost-url1.81-dev librocksdb-dev libssl-dev zlib1g-dev \
      libconcurrentqueue-dev prometheus-cpp-dev libpugixml-dev libisal-dev libarchive-dev \
      libsqlite3-dev \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DAPUS_BUILD_TESTS=OFF \
      -DAPUS_BUILD_BENCH=OFF \
 && ninja -C /build \
 && cmake --install /build --prefix /opt/apus

# The default image: Apus built from this checkout.
FROM runtime AS apus
COPY --from=build /opt/apus/bin/ /opt/apus/bin/
