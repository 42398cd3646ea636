# Stand-in for mysql:8.0 in the container tests only (scripts/images.sh builds it): Debian's
# MariaDB server on the local Debian base. No image registry answers on our machines.
# Laid out like the official image as docker-compose.firefox-sync.yml uses it: data under
# /var/lib/mysql, port 3306, arguments that start with "-" go to the server, and on an empty
# data folder MYSQL_DATABASE, MYSQL_USER and MYSQL_PASSWORD (or MYSQL_PASSWORD_FILE, read as
# root) are created, with MYSQL_RANDOM_ROOT_PASSWORD; mysqladmin answers the health probe.
# Build context: scripts/standin-mysql-entrypoint.sh.
ARG BASE=tokenserver-standin/debian:bookworm-minbase
FROM ${BASE}
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends mariadb-server \
 && rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /var/lib/mysql/* \
 && mkdir -p /var/lib/mysql /run/mysqld && chown mysql:mysql /var/lib/mysql /run/mysqld
COPY standin-mysql-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
LABEL org.tokenserver.standin-for=mysql:8.0
EXPOSE 3306
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["mysqld"]
