# Stand-in for mongo:7 in the container tests only (scripts/images.sh builds it):
# mongo-java-server, the MongoDB-compatible server of tools/compat-mongo, on Debian's
# JRE. No MongoDB server binary is reachable from our machines. Build context: the
# jars and classes of .tools/compat-mongo.
ARG BASE=tokenserver-standin/debian:bookworm-minbase
FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* \
 && groupadd -g 999 mongodb && useradd -u 999 -g mongodb -d /data/db -M mongodb \
 && mkdir -p /data/db && chown 999:999 /data/db
COPY lib/ /opt/compat-mongo/lib/
COPY classes/ /opt/compat-mongo/classes/
LABEL org.tokenserver.standin-for=mongo:7
# Like mongo:7: an unprivileged user, port 27017, data under /data/db (a named volume in compose).
USER 999:999
EXPOSE 27017
CMD ["java", "-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", \
     "-cp", "/opt/compat-mongo/lib/*:/opt/compat-mongo/classes", "CompatMongo", "0.0.0.0", "27017", "/data/db/compat-mongo.mv"]
