# The openlake CLI (bench, kv stats, node info, codec) on Debian 12.
#   docker build -f deploy/docker/openlake.Dockerfile -t openlake/openlake .
#   docker run --rm --network host openlake/openlake bench s3 --endpoint http://127.0.0.1:9000
FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential pkg-config meson ninja-build liburing-dev libisal-dev liblmdb-dev \
      libexpat1-dev libssl-dev libxxhash-dev libzstd-dev liblz4-dev libjansson-dev libucx-dev \
      libhwloc-dev && \
    rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup build --buildtype=release && ninja -C build && \
    meson install -C build --destdir /out

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      liburing2 libisal2 liblmdb0 libexpat1 libssl3 libxxhash0 libzstd1 liblz4-1 libjansson4 libucx0 tini && \
    rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 openlake
COPY --from=build /out/usr/local/ /usr/local/
RUN ldconfig
USER openlake
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/openlake"]
CMD ["--help"]
