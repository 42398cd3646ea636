# Stand-in for redis:7 in the container tests only (scripts/images.sh builds it): Debian's
# redis-server on the local Debian base. No image registry answers on our machines.
# Like redis:7 run without a config file: port 6379, data under /data, an unprivileged user,
# protected mode off (the compose network is the boundary). The gateway needs
# maxmemory-policy noeviction (the default; it refuses a Redis that may evict) and keeps
# nonces across a restart with the append-only file.
ARG BASE=tokenserver-standin/debian:bookworm-minbase
FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && mkdir -p /data && chown redis:redis /data
LABEL org.tokenserver.standin-for=redis:7
USER redis
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--bind", "0.0.0.0", "--protected-mode", "no", "--dir", "/data", "--appendonly", "yes", "--maxmemory-policy", "noeviction"]
