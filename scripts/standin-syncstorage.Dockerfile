# Stand-in for Mozilla's syncstorage-rs image in the container tests only (scripts/images.sh
# builds it, tests/containers-firefox-sync.test.ts runs it as STORAGE_NODE_IMAGE): our
# node-gateway in front of the demo application, laid out like Mozilla's image (the program
# at /app/bin/syncserver, SYNC_* settings, curl for the health probe); see
# scripts/standin-syncserver.sh. Build context: that script.
ARG APP_IMAGE=tokenserver:local
FROM ${APP_IMAGE}
USER root
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends curl \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && mkdir -p /app/bin
COPY standin-syncserver.sh /app/bin/syncserver
LABEL org.tokenserver.standin-for=mozilla/syncstorage-rs
USER 1000:1000
EXPOSE 8000
ENTRYPOINT ["/app/bin/syncserver"]
CMD []
