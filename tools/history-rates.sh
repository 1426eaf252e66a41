#!/usr/bin/env bash
# The events' history's sustained rates (docs/performance.md), SQLite and PostgreSQL in one run:
# cudanms-history-bench on a SQLite file and on a PostgreSQL server of its own (Debian's
# postgresql-15: initdb in a temporary folder, 127.0.0.1, a free port; as the postgres user when
# run as root), both in a temporary folder on this machine's disk.
#   tools/history-rates.sh [build-dir] [events] [cameras]   (defaults build, 100000, 32)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
events=${2:-100000}
cameras=${3:-32}
bench="$build/service/cudanms-history-bench"
[ -x "$bench" ] || { echo "error: no $bench: build first" >&2; exit 2; }
bin=/usr/lib/postgresql/15/bin
[ -x "$bin/postgres" ] || { echo "error: no PostgreSQL server (apt-get install postgresql-15)" >&2; exit 2; }
dir=$(mktemp -d)
as=()
if [ "$(id -u)" = 0 ]; then
  chmod 755 "$dir"
  as=(setpriv --reuid=postgres --regid=postgres --clear-groups --)
fi
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
mkdir "$dir/data"
[ ${#as[@]} -gt 0 ] && chown postgres:postgres "$dir/data"
"${as[@]}" "$bin/initdb" -D "$dir/data" -U cudanms -A trust --no-locale -E UTF8 >/dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# Durable as a site would run it: fsync and synchronous commit on (the defaults).
"${as[@]}" "$bin/postgres" -D "$dir/data" -p "$port" -k "$dir/data" -c listen_addresses=127.0.0.1 \
  >"$dir/postgres.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  "$bin/pg_isready" -q -h 127.0.0.1 -p "$port" && break
  sleep 0.1
done
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), disk of $dir: $(df -h --output=source "$dir" | tail -1)"
"$bench" "$dir/history.sqlite" "$events" "$cameras"
"$bench" "postgresql://cudanms@127.0.0.1:$port/postgres" "$events" "$cameras"
