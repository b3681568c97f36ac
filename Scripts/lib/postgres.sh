# A throw-away PostgreSQL cluster for tests and benchmarks: the one way this repository starts
# one. The cluster runs under Scripts/lib/start-postgres, which starts it and stops it when its
# owner (the process that asked for it) is gone, kill -9 included. Sourced by scripts; run through
# bash by Scripts/lib/servers.py (fleet-test, bench-fleet) and Tests/TestSupport/TestPostgres.swift
# for restarts and stops.
#
# Debian's PostgreSQL 15, initdb in a directory of its own, the server on 127.0.0.1 at a free
# port with its unix socket in the same directory, SCRAM-SHA-256 passwords over TCP, trust on the
# socket (for psql as the superuser), fsync on (the server's default), 40 connections at most.
# initdb and postgres refuse to run as root: as root they run as Debian's `postgres` user, who
# then owns the directory.
#
#   postgres_launch DIR   initdb (when DIR/data is missing) and start; sets postgres_port and
#                         postgres_url (postgres://fleet:fleet-secret@127.0.0.1:PORT/fleet, a
#                         role and database made for the caller); fails after 20 ports;
#                         start-postgres's. With postgres_primary set (the directory of a
#                         running cluster), a synchronous standby of it instead of initdb:
#                         pg_basebackup over TCP as the superuser, streaming as `standby`, and the
#                         primary told to wait for it at every commit (synchronous_standby_names)
#   postgres_promote      pg_ctl promote: a standby becomes a primary that takes writes
#   postgres_start DIR    for scripts: start-postgres DIR owned by this shell; sets
#                         postgres_port, postgres_url and postgres_helper (start-postgres's pid)
#   postgres_restart      pg_ctl restart -m fast (every connection ends; same port)
#   postgres_stop [MODE]  pg_ctl stop -m MODE (fast; immediate: nothing kept); the cluster's
#                         directory stays, and so does start-postgres, until the owner ends it
#   postgres_resume       starts a stopped cluster again on its port
#   postgres_end          stops the cluster and ends start-postgres (the directory stays: the
#                         caller removes it)
#   postgres_psql SQL...  runs SQL as the superuser through the socket
#
# Every function but postgres_launch and postgres_start needs postgres_dir and postgres_port set
# (they are, after postgres_start; another process sets them from DIR/postgres.ready).

postgres_bin=/usr/lib/postgresql/15/bin
postgres_library="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
postgres_dir=
postgres_primary=
postgres_port=
postgres_url=
postgres_helper=

postgres_as_server() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

postgres_psql() {
    "$postgres_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$postgres_dir" -p "$postgres_port" -U fleet_admin -d postgres -c "$*"
}

postgres_launch() {
    local dir="$1" port attempt
    [ -x "$postgres_bin/postgres" ] || { echo "postgres: $postgres_bin/postgres is missing: run Scripts/install-deps --test (Debian package postgresql)" >&2; return 1; }
    postgres_dir="$(cd "$dir" && pwd)"
    if [ -n "$postgres_primary" ] && [ ! -d "$postgres_dir/data" ]; then
        postgres_base_backup || return 1
    elif [ ! -d "$postgres_dir/data" ]; then
        printf '%s' admin-secret >"$postgres_dir/superuser-password"
        [ "$(id -u)" != 0 ] || chown -R postgres:postgres "$postgres_dir"
        # --no-sync: initdb's own final sync only; the server keeps fsync on.
        postgres_as_server "$postgres_bin/initdb" -D "$postgres_dir/data" -U fleet_admin --pwfile "$postgres_dir/superuser-password" \
            --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C --no-sync --no-instructions >"$postgres_dir/initdb.log" 2>&1 ||
            { echo "postgres: initdb failed: $(cat "$postgres_dir/initdb.log")" >&2; return 1; }
    fi
    for attempt in $(seq 20); do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue
        # Later settings win: each start appends its own port.
        printf '%s\n' "listen_addresses = '127.0.0.1'" "port = $port" "unix_socket_directories = '$postgres_dir'" \
            "fsync = on" "password_encryption = 'scram-sha-256'" "max_connections = 40" | postgres_as_server tee -a "$postgres_dir/data/postgresql.conf" >/dev/null
        if postgres_as_server "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -l "$postgres_dir/server.log" -w -t 30 start >/dev/null 2>&1; then
            postgres_port=$port
            if [ -n "$postgres_primary" ]; then
                postgres_url="postgres://fleet:fleet-secret@127.0.0.1:$port/fleet"
                postgres_make_synchronous
                return
            fi
            postgres_psql "do \$\$ begin if not exists (select from pg_roles where rolname = 'fleet') then
                               create role fleet login createdb password 'fleet-secret'; end if; end \$\$" >/dev/null || return 1
            [ -n "$(postgres_psql "select 1 from pg_database where datname = 'fleet'")" ] || postgres_psql "create database fleet owner fleet" >/dev/null || return 1
            postgres_url="postgres://fleet:fleet-secret@127.0.0.1:$port/fleet"
            return 0
        fi
    done
    echo "postgres: the server did not start on 127.0.0.1: $(tail -5 "$postgres_dir/server.log" 2>/dev/null)" >&2
    return 1
}

# The primary's data, copied while it runs (its WAL streamed alongside), and the settings that make
# the copy a standby following it: standby.signal and primary_conninfo naming it `standby`.
postgres_base_backup() {
    local primary_port
    read -r primary_port _ <"$postgres_primary/postgres.ready" || { echo "postgres: no running primary in $postgres_primary" >&2; return 1; }
    [ "$(id -u)" != 0 ] || chown -R postgres:postgres "$postgres_dir"
    PGPASSWORD=admin-secret postgres_as_server env PGPASSWORD=admin-secret "$postgres_bin/pg_basebackup" -h 127.0.0.1 -p "$primary_port" \
        -U fleet_admin -D "$postgres_dir/data" -X stream --checkpoint=fast --no-sync >"$postgres_dir/basebackup.log" 2>&1 ||
        { echo "postgres: pg_basebackup from 127.0.0.1:$primary_port failed: $(cat "$postgres_dir/basebackup.log")" >&2; return 1; }
    postgres_as_server touch "$postgres_dir/data/standby.signal"
    printf '%s\n' "primary_conninfo = 'host=127.0.0.1 port=$primary_port user=fleet_admin password=admin-secret application_name=standby'" |
        postgres_as_server tee -a "$postgres_dir/data/postgresql.conf" >/dev/null
}

# The primary waits at every commit until the standby has flushed it; waits (30 s at most) until
# the standby streams synchronously.
postgres_make_synchronous() {
    local primary_port state
    read -r primary_port _ <"$postgres_primary/postgres.ready"
    "$postgres_bin/psql" -X -q -A -t -h "$postgres_primary" -p "$primary_port" -U fleet_admin -d postgres \
        -c "alter system set synchronous_standby_names = 'standby'" -c "select pg_reload_conf()" >/dev/null || return 1
    for _ in $(seq 300); do
        state="$("$postgres_bin/psql" -X -q -A -t -h "$postgres_primary" -p "$primary_port" -U fleet_admin -d postgres \
            -c "select sync_state from pg_stat_replication where application_name = 'standby'")"
        [ "$state" = sync ] && return 0
        sleep 0.1
    done
    echo "postgres: the standby does not stream synchronously (state '$state'): $(tail -3 "$postgres_dir/server.log")" >&2
    return 1
}

postgres_promote() {
    postgres_as_server "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -w -t 30 promote >/dev/null
}

postgres_start() {
    local dir="$1"
    postgres_dir="$(cd "$dir" && pwd)"
    rm -f "$postgres_dir/postgres.ready"
    "$postgres_library/start-postgres" --owner $$ "$postgres_dir" </dev/null &
    postgres_helper=$!
    while [ ! -s "$postgres_dir/postgres.ready" ]; do
        kill -0 "$postgres_helper" 2>/dev/null || { wait "$postgres_helper"; postgres_helper=; return 1; }
        sleep 0.05
    done
    read -r postgres_port postgres_url <"$postgres_dir/postgres.ready"
}

postgres_restart() {
    postgres_as_server "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -l "$postgres_dir/server.log" -m fast -w -t 30 restart >/dev/null
}

postgres_resume() {
    postgres_as_server "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -l "$postgres_dir/server.log" -w -t 30 start >/dev/null
}

postgres_stop() {
    [ -n "$postgres_dir" ] && [ -d "$postgres_dir/data" ] || return 0
    postgres_as_server "$postgres_bin/pg_ctl" -D "$postgres_dir/data" -m "${1:-fast}" -w stop >/dev/null 2>&1 || true
}

postgres_end() {
    postgres_stop
    [ -n "$postgres_helper" ] || return 0
    kill -TERM "$postgres_helper" 2>/dev/null
    wait "$postgres_helper" 2>/dev/null
    postgres_helper=
}
