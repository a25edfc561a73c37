#!/usr/bin/env bash
# The benchmark peers, opt-in: `make test` never runs this.
#
#   bash bench/peers.sh install        build FerretDB v1.24.2 from the Go module proxy, check
#                                      that PostgreSQL's server binaries are present (installs
#                                      Debian's postgresql package when they are not), and build
#                                      silt-bench with `--features peers` (RocksDB, SQLite,
#                                      the PostgreSQL client)
#   bash bench/peers.sh start          start both on loopback, on temporary data directories
#   bash bench/peers.sh stop           stop both and remove their data directories
#   bash bench/peers.sh env            print the variables silt-bench reads (after start)
#
# Everything lives under $SILT_PEERS (default target/peers). Settings, chosen to match siltd's
# defaults (bench/RESULTS.md, "Fairness"):
#   PostgreSQL: shared_buffers = $PG_CACHE_MB (default 64 MiB, siltd's benchmark cache),
#     fsync on, synchronous_commit off (a commit is acknowledged before its WAL is flushed;
#     the WAL writer flushes every 200 ms, as siltd's group commit acknowledges an insert
#     before its log record is synced), full_page_writes on, autovacuum on.
#     With PG_MEM_MB set, PostgreSQL runs in a memory cgroup of that size (cgroup v1 or v2):
#     its processes and the file pages they read share the limit, so its table and indexes
#     cannot stay in the OS page cache beyond it (siltd reads with O_DIRECT in the benchmarks).
#   FerretDB: the SQLite handler (its own defaults: WAL journal mode).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
peers="${SILT_PEERS:-$root/target/peers}"
ferret_version=v1.24.2
pg_port="${PG_PORT:-54329}"
ferret_port="${FERRET_PORT:-27919}"
pg_cache_mb="${PG_CACHE_MB:-64}"
pg_mem_mb="${PG_MEM_MB:-}"
mkdir -p "$peers"

pg_bin() {
    for d in /usr/lib/postgresql/*/bin; do
        [ -x "$d/initdb" ] && { echo "$d"; return; }
    done
    return 1
}

install() {
    if ! pg_bin >/dev/null; then
        echo "installing PostgreSQL from Debian's packages"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    fi
    echo "PostgreSQL: $("$(pg_bin)/postgres" --version)"
    # The rocksdb crate generates its bindings with bindgen, which needs libclang.
    if ! ls /usr/lib/llvm-*/lib/libclang.so >/dev/null 2>&1; then
        echo "installing libclang-dev from Debian's packages (for the rocksdb crate)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libclang-dev >/dev/null
    fi
    echo "building silt-bench with the peers (RocksDB compiles its C++ source: many minutes)"
    # A target directory of its own, so that this build and `make test`'s never replace each
    # other's silt-bench: the binary is $peers/release/silt-bench.
    (cd "$root" && CARGO_TARGET_DIR="$peers" cargo build --release -p silt-bench --features peers)
    (cd "$root" && cargo build --release -p siltd)
    if [ ! -x "$peers/bin/ferretdb" ]; then
        echo "building FerretDB $ferret_version (go build; a few minutes)"
        local src
        src="$(go mod download -json "github.com/FerretDB/FerretDB@$ferret_version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
        rm -rf "$peers/ferretdb-src"
        cp -r "$src" "$peers/ferretdb-src"
        chmod -R u+w "$peers/ferretdb-src"
        echo "$ferret_version" > "$peers/ferretdb-src/build/version/version.txt"
        (cd "$peers/ferretdb-src" && go build -o "$peers/bin/ferretdb" ./cmd/ferretdb)
    fi
    echo "FerretDB: $("$peers/bin/ferretdb" --version 2>&1 | head -1)"
}

start() {
    stop quiet
    local bin
    bin="$(pg_bin)"
    mkdir -p "$peers/pgdata" "$peers/ferretdata" "$peers/ferretstate"
    local pguser=()
    # initdb refuses to run as root: run PostgreSQL as the nobody-like user 'postgres' if we are root.
    if [ "$(id -u)" = 0 ]; then
        id postgres >/dev/null 2>&1 || useradd -r -M postgres
        chown -R postgres "$peers/pgdata"
        pguser=(runuser -u postgres --)
    fi
    "${pguser[@]}" "$bin/initdb" -D "$peers/pgdata" -U bench --auth=trust -E UTF8 >/dev/null
    cat >> "$peers/pgdata/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $pg_port
unix_socket_directories = ''
shared_buffers = ${pg_cache_mb}MB
fsync = on
synchronous_commit = off
wal_writer_delay = 200ms
full_page_writes = on
max_wal_size = 4GB
EOF
    local cg=""
    if [ -n "$pg_mem_mb" ]; then
        cg="$(pg_cgroup)" || { echo "PG_MEM_MB=$pg_mem_mb: no writable memory cgroup here" >&2; exit 1; }
        echo "$pg_mem_mb" > "$peers/pg_mem_mb"
    else
        rm -f "$peers/pg_mem_mb"
    fi
    # The subshell joins the cgroup first; pg_ctl and the postmaster it starts inherit it.
    (
        [ -z "$cg" ] || echo "$BASHPID" > "$cg/cgroup.procs"
        exec "${pguser[@]}" "$bin/pg_ctl" -D "$peers/pgdata" -l "$peers/pgdata/log" -w start >/dev/null
    )
    "$peers/bin/ferretdb" --handler=sqlite --sqlite-url="file:$peers/ferretdata/" \
        --state-dir="$peers/ferretstate" --listen-addr="127.0.0.1:$ferret_port" \
        --telemetry=disable --log-level=warn >"$peers/ferretdb.log" 2>&1 &
    echo $! > "$peers/ferretdb.pid"
    for _ in $(seq 50); do
        (exec 3<>"/dev/tcp/127.0.0.1/$ferret_port") 2>/dev/null && break
        sleep 0.2
    done
    env
}

# Create (or reset) the memory cgroup for PostgreSQL, limited to PG_MEM_MB; print its path.
pg_cgroup() {
    local cg
    if [ -d /sys/fs/cgroup/memory ]; then
        cg=/sys/fs/cgroup/memory/silt-bench-pg
        mkdir -p "$cg" 2>/dev/null || return 1
        echo $((pg_mem_mb << 20)) > "$cg/memory.limit_in_bytes" 2>/dev/null || return 1
    elif [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        cg=/sys/fs/cgroup/silt-bench-pg
        mkdir -p "$cg" 2>/dev/null || return 1
        echo $((pg_mem_mb << 20)) > "$cg/memory.max" 2>/dev/null || return 1
    else
        return 1
    fi
    echo "$cg"
}

stop() {
    if [ -f "$peers/ferretdb.pid" ]; then
        kill "$(cat "$peers/ferretdb.pid")" 2>/dev/null || true
        rm -f "$peers/ferretdb.pid"
    fi
    if [ -f "$peers/pgdata/postmaster.pid" ]; then
        local pguser=()
        [ "$(id -u)" = 0 ] && pguser=(runuser -u postgres --)
        "${pguser[@]}" "$(pg_bin)/pg_ctl" -D "$peers/pgdata" -m fast -w stop >/dev/null || true
    fi
    rm -rf "$peers/pgdata" "$peers/ferretdata" "$peers/ferretstate" "$peers/pg_mem_mb"
    [ "${1:-}" = quiet ] || echo "peers stopped"
}

env() {
    echo "export SILT_PG=\"host=127.0.0.1 port=$pg_port user=bench dbname=postgres\""
    echo "export SILT_PG_DATA=\"$peers/pgdata\""
    echo "export SILT_FERRETDB=127.0.0.1:$ferret_port"
    echo "export SILT_FERRETDB_DATA=\"$peers/ferretdata\""
    echo "export SILT_BENCH=\"$peers/release/silt-bench\""
    echo "export SILTD_BIN=\"$root/target/release/siltd\""
    if [ -f "$peers/pg_mem_mb" ]; then
        echo "export SILT_PG_MEM_MB=$(cat "$peers/pg_mem_mb")"
    else
        echo "unset SILT_PG_MEM_MB"
    fi
}

case "${1:-}" in
install) install ;;
start) start ;;
stop) stop ;;
env) env ;;
*) sed -n '2,16p' "$0"; exit 2 ;;
esac
