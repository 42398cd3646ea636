# Stand-in for haproxy:2.6 in the container tests only (scripts/images.sh builds it): Debian's
# haproxy (2.6, the same series) on the local Debian base. No image registry answers on our
# machines. Laid out like the official image: the configuration at
# /usr/local/etc/haproxy/haproxy.cfg, an unprivileged haproxy user, SIGUSR1 to stop softly.
ARG BASE=tokenserver-standin/debian:bookworm-minbase
FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && mkdir -p /usr/local/etc/haproxy
LABEL org.tokenserver.standin-for=haproxy:2.6
USER haproxy
STOPSIGNAL SIGUSR1
CMD ["haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
