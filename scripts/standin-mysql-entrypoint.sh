#!/bin/bash
# The mysql:8.0 stand-in's entrypoint (scripts/standin-mysql.Dockerfile): what the official
# image's entrypoint does for docker-compose.firefox-sync.yml, with Debian's MariaDB.
set -euo pipefail

# NAME from NAME or from the file NAME_FILE names (read here, as root).
file_env() {
  local var="$1" file_var="${1}_FILE"
  if [ -n "${!file_var:-}" ]; then
    export "$var"="$(<"${!file_var}")"
    unset "$file_var"
  fi
}

if [ "${1:0:1}" = '-' ]; then set -- mysqld "$@"; fi
if [ "$1" != mysqld ] && [ "$1" != mariadbd ]; then exec "$@"; fi
shift
file_env MYSQL_PASSWORD
file_env MYSQL_ROOT_PASSWORD
chown mysql:mysql /var/lib/mysql /run/mysqld

if [ ! -d /var/lib/mysql/mysql ]; then
  echo "standin-mysql: initialising /var/lib/mysql" >&2
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=normal --skip-test-db >/dev/null
  socket=/run/mysqld/init.sock
  mariadbd --user=mysql --datadir=/var/lib/mysql --skip-networking --socket="$socket" "$@" &
  pid=$!
  for _ in $(seq 1 60); do
    mariadb-admin --socket="$socket" -uroot ping >/dev/null 2>&1 && break
    sleep 1
  done
  root_password="${MYSQL_ROOT_PASSWORD:-}"
  if [ -z "$root_password" ] && [ -n "${MYSQL_RANDOM_ROOT_PASSWORD:-}" ]; then root_password="$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"; fi
  quote() { printf "'%s'" "${1//\'/\'\'}"; }
  {
    [ -z "$root_password" ] || echo "ALTER USER 'root'@'localhost' IDENTIFIED BY $(quote "$root_password");"
    [ -z "${MYSQL_DATABASE:-}" ] || echo "CREATE DATABASE IF NOT EXISTS \`${MYSQL_DATABASE}\`;"
    if [ -n "${MYSQL_USER:-}" ] && [ -n "${MYSQL_PASSWORD:-}" ]; then
      echo "CREATE USER $(quote "$MYSQL_USER")@'%' IDENTIFIED BY $(quote "$MYSQL_PASSWORD");"
      [ -z "${MYSQL_DATABASE:-}" ] || echo "GRANT ALL ON \`${MYSQL_DATABASE}\`.* TO $(quote "$MYSQL_USER")@'%';"
    fi
    echo "FLUSH PRIVILEGES;"
  } | mariadb --socket="$socket" -uroot
  kill "$pid"
  wait "$pid" || true
  echo "standin-mysql: initialised" >&2
fi
unset MYSQL_PASSWORD MYSQL_ROOT_PASSWORD
exec mariadbd --user=mysql --datadir=/var/lib/mysql --bind-address=0.0.0.0 --port=3306 "$@"
