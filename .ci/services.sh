# Sourced by .ci/run: start and stop the Redis, Redis Cluster and PostgreSQL servers the store
# tests use.
#
#   source .ci/services.sh
#   services_start   # exports CONTEXTFOLD_TEST_REDIS_URL, CONTEXTFOLD_TEST_REDIS_CLUSTER_URL
#                    # and CONTEXTFOLD_TEST_POSTGRES_URL
#   ...
#   services_stop    # stops every server and removes their data
#
# Both servers listen on loopback only, keep their data in one temporary folder, and need no
# configuration file. redis-server is installed from Debian when missing. PostgreSQL runs from
# the machine's own binaries (initdb/pg_ctl on PATH, or /usr/lib/postgresql/<version>/bin) as
# the unprivileged `postgres` user, because the server refuses to run as root.
# Calling services_start twice is harmless: a server that already answers is reused.

CF_REDIS_PORT="${CF_REDIS_PORT:-63790}"
CF_PG_PORT="${CF_PG_PORT:-54329}"
# A cluster node also listens on its port + 10000 (the cluster bus), so stay below 55536.
CF_REDIS_CLUSTER_PORT="${CF_REDIS_CLUSTER_PORT:-46380}"
CF_PG_DB="${CF_PG_DB:-contextfold_test}"
CF_PG_USER="${CF_PG_USER:-postgres}"
CF_SERVICES_STATE="${CF_SERVICES_STATE:-${TMPDIR:-/tmp}/contextfold-ci-services}"

_cf_log() { echo "[services] $*" >&2; }

# Run a command as the unprivileged database user (directly when we are not root).
_cf_as_pg() {
    if [ "$(id -u)" -eq 0 ]; then
        if command -v runuser >/dev/null 2>&1; then
            runuser -u "$CF_PG_USER" -- "$@"
        else
            su -s /bin/sh "$CF_PG_USER" -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

_cf_pg_bin() {
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$dir/pg_ctl" ] && [ -x "$dir/initdb" ]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

_cf_start_redis() {
    if ! command -v redis-server >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            _cf_log "redis-server is missing and we are not root: cannot install it"
            return 1
        fi
        _cf_log "installing redis-server"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    fi
    if redis-cli -h 127.0.0.1 -p "$CF_REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
        _cf_log "redis already answers on 127.0.0.1:$CF_REDIS_PORT"
        return 0
    fi
    mkdir -p "$CF_SERVICES_STATE/redis"
    redis-server --bind 127.0.0.1 --port "$CF_REDIS_PORT" --daemonize yes \
        --save '' --appendonly no --dir "$CF_SERVICES_STATE/redis" \
        --pidfile "$CF_SERVICES_STATE/redis/redis.pid" \
        --logfile "$CF_SERVICES_STATE/redis/redis.log"
    local i
    for i in $(seq 1 50); do
        if redis-cli -h 127.0.0.1 -p "$CF_REDIS_PORT" ping 2>/dev/null | grep -q PONG; then
            _cf_log "redis up on 127.0.0.1:$CF_REDIS_PORT"
            return 0
        fi
        sleep 0.1
    done
    _cf_log "redis did not start; log follows"
    cat "$CF_SERVICES_STATE/redis/redis.log" >&2 || true
    return 1
}

# Three masters on consecutive loopback ports (no replicas): enough for keys to spread over
# nodes, so any command that spans slots fails here as it would on a production cluster.
_cf_cluster_ports() { echo "$CF_REDIS_CLUSTER_PORT" $((CF_REDIS_CLUSTER_PORT + 1)) $((CF_REDIS_CLUSTER_PORT + 2)); }

_cf_start_redis_cluster() {
    if redis-cli -h 127.0.0.1 -p "$CF_REDIS_CLUSTER_PORT" cluster info 2>/dev/null \
        | grep -q 'cluster_state:ok'; then
        _cf_log "redis cluster already answers on 127.0.0.1:$CF_REDIS_CLUSTER_PORT"
        return 0
    fi
    local port dir nodes=()
    for port in $(_cf_cluster_ports); do
        dir="$CF_SERVICES_STATE/redis-cluster/$port"
        mkdir -p "$dir"
        redis-server --bind 127.0.0.1 --port "$port" --daemonize yes \
            --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" \
            --cluster-node-timeout 5000 --save '' --appendonly no --dir "$dir" \
            --pidfile "$dir/redis.pid" --logfile "$dir/redis.log"
        nodes+=("127.0.0.1:$port")
    done
    local i
    for port in $(_cf_cluster_ports); do
        for i in $(seq 1 51); do
            redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG && break
            if [ "$i" -eq 51 ]; then
                _cf_log "redis cluster node $port did not start; log follows"
                cat "$CF_SERVICES_STATE/redis-cluster/$port/redis.log" >&2 || true
                return 1
            fi
            sleep 0.1
        done
    done
    redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >/dev/null || {
        _cf_log "redis cluster create failed"
        return 1
    }
    for i in $(seq 1 100); do
        if redis-cli -h 127.0.0.1 -p "$CF_REDIS_CLUSTER_PORT" cluster info 2>/dev/null \
            | grep -q 'cluster_state:ok'; then
            _cf_log "redis cluster up on 127.0.0.1:${nodes[*]##*:}"
            return 0
        fi
        sleep 0.1
    done
    _cf_log "redis cluster did not become ready"
    return 1
}

_cf_stop_redis_cluster() {
    local port stopped=""
    for port in $(_cf_cluster_ports); do
        if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
            redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
            stopped=1
        fi
    done
    if [ -n "$stopped" ]; then _cf_log "redis cluster stopped"; fi
}

_cf_start_postgres() {
    local bin
    if ! bin="$(_cf_pg_bin)"; then
        _cf_log "PostgreSQL binaries (initdb, pg_ctl) not found"
        return 1
    fi
    if [ "$(id -u)" -eq 0 ] && ! id "$CF_PG_USER" >/dev/null 2>&1; then
        _cf_log "creating system user $CF_PG_USER"
        useradd --system --user-group --no-create-home --shell /bin/sh "$CF_PG_USER"
    fi
    local root="$CF_SERVICES_STATE/pg"
    local data="$root/data"
    if "$bin/pg_isready" -q -h 127.0.0.1 -p "$CF_PG_PORT" 2>/dev/null; then
        _cf_log "postgres already answers on 127.0.0.1:$CF_PG_PORT"
    else
        # One folder owned by the database user holds the cluster, its socket and its log.
        mkdir -p "$root/sock"
        if [ "$(id -u)" -eq 0 ]; then chown -R "$CF_PG_USER" "$root"; fi
        if [ ! -s "$data/PG_VERSION" ]; then
            rm -rf "$data"
            _cf_as_pg "$bin/initdb" -D "$data" -U "$CF_PG_USER" --auth=trust -E UTF8 \
                --no-sync >"$CF_SERVICES_STATE/initdb.log" 2>&1 || {
                cat "$CF_SERVICES_STATE/initdb.log" >&2
                return 1
            }
        fi
        # fsync off: test data need not survive a machine crash, and it keeps the tests fast.
        _cf_as_pg "$bin/pg_ctl" -D "$data" -l "$root/postgres.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $CF_PG_PORT -k $root/sock -c fsync=off -c max_connections=200" \
            start >/dev/null || {
            cat "$root/postgres.log" >&2 || true
            return 1
        }
        _cf_log "postgres up on 127.0.0.1:$CF_PG_PORT"
    fi
    if ! "$bin/psql" -h 127.0.0.1 -p "$CF_PG_PORT" -U "$CF_PG_USER" -d postgres -tAc \
        "SELECT 1 FROM pg_database WHERE datname = '$CF_PG_DB'" | grep -q 1; then
        "$bin/createdb" -h 127.0.0.1 -p "$CF_PG_PORT" -U "$CF_PG_USER" "$CF_PG_DB"
    fi
}

services_start() {
    mkdir -p "$CF_SERVICES_STATE"
    chmod 755 "$CF_SERVICES_STATE"
    _cf_start_redis
    _cf_start_redis_cluster
    _cf_start_postgres
    export CONTEXTFOLD_TEST_REDIS_URL="redis://127.0.0.1:$CF_REDIS_PORT/0"
    export CONTEXTFOLD_TEST_REDIS_CLUSTER_URL="redis://127.0.0.1:$CF_REDIS_CLUSTER_PORT"
    export CONTEXTFOLD_TEST_POSTGRES_URL="postgresql://$CF_PG_USER@127.0.0.1:$CF_PG_PORT/$CF_PG_DB"
    _cf_log "CONTEXTFOLD_TEST_REDIS_URL=$CONTEXTFOLD_TEST_REDIS_URL"
    _cf_log "CONTEXTFOLD_TEST_POSTGRES_URL=$CONTEXTFOLD_TEST_POSTGRES_URL"
    _cf_log "CONTEXTFOLD_TEST_REDIS_CLUSTER_URL=$CONTEXTFOLD_TEST_REDIS_CLUSTER_URL"
}

services_stop() {
    local bin
    if redis-cli -h 127.0.0.1 -p "$CF_REDIS_PORT" ping >/dev/null 2>&1; then
        redis-cli -h 127.0.0.1 -p "$CF_REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
        _cf_log "redis stopped"
    fi
    _cf_stop_redis_cluster
    if [ -s "$CF_SERVICES_STATE/pg/data/PG_VERSION" ] && bin="$(_cf_pg_bin)"; then
        _cf_as_pg "$bin/pg_ctl" -D "$CF_SERVICES_STATE/pg/data" -m fast -w stop >/dev/null 2>&1 || true
        _cf_log "postgres stopped"
    fi
    rm -rf "$CF_SERVICES_STATE"
    unset CONTEXTFOLD_TEST_REDIS_URL CONTEXTFOLD_TEST_POSTGRES_URL CONTEXTFOLD_TEST_REDIS_CLUSTER_URL
    return 0
}
