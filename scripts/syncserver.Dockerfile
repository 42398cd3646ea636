# Mozilla's real syncserver (syncstorage-rs, ../shared/tools/syncstorage-rs, given by
# SYNCSERVER_BIN) in an image laid out like Mozilla's: the program at /app/bin/syncserver, an
# unprivileged "app" user (uid 10001), curl for the health probe. For the container tests only
# (scripts/images.sh builds it when SYNCSERVER_BIN is set); no image registry answers on our
# machines. The binary needs libssl3 only. Build context: the binary.
ARG BASE=tokenserver-standin/debian:bookworm-minbase
FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libssl3 ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && groupadd --gid 10001 app && useradd --uid 10001 --gid 10001 --home /app --create-home app
COPY syncserver /app/bin/syncserver
LABEL org.tokenserver.image-of=mozilla/syncstorage-rs
WORKDIR /app
USER app:app
EXPOSE 8000
ENTRYPOINT ["/app/bin/syncserver"]
