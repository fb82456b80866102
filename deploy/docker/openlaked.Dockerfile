# Build and run openlaked on Debian 12 (bookworm), everything from Debian's packages.
#   docker build -f deploy/docker/openlaked.Dockerfile -t openlake/openlaked .
# The KV pool over RDMA (UCX) is built in: --build-arg RDMA=1, the upstream docs' flag, is the
# default; RDMA=0 builds without UCX (TCP and the local shared-memory path only).
#   docker run --rm -p 9000:9000 -p 9400:9400 -v /srv/openlake:/var/lib/openlake openlake/openlaked
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential pkg-config meson ninja-build liburing-dev libisal-dev liblmdb-dev \
      libexpat1-dev libssl-dev libxxhash-dev libzstd-dev liblz4-dev libjansson-dev libucx-dev \
      libhwloc-dev && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG RDMA=1
RUN if [ "$RDMA" = 0 ]; then ucx=disabled; else ucx=enabled; fi && \
    meson setup build --buildtype=release -Ducx=$ucx && ninja -C build && \
    meson install -C build --destdir /out

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      liburing2 libisal2 liblmdb0 libexpat1 libssl3 libxxhash0 libjansson4 libucx0 libhwloc15 tini && rm -rf /var/lib/apt/lists/* && \
    useradd --system --uid 10001 --home /var/lib/openlake openlake && \
    mkdir -p /var/lib/openlake /etc/openlake && chown openlake /var/lib/openlake
COPY --from=build /out/usr/local/ /usr/local/
COPY deploy/docker/openlake.toml /etc/openlake/openlake.toml
USER openlake
WORKDIR /var/lib/openlake
EXPOSE 9000 9001 9400
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/openlaked"]
CMD ["--config", "/etc/openlake/openlake.toml"]
