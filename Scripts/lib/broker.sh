# Debian's mosquitto for tests and benchmarks: the one way this repository starts it. The broker
# runs under Scripts/lib/start-broker, which starts it, waits until it listens, and stops it when
# its owner (the process that asked for it) is gone, kill -9 included. Sourced by Scripts/bench
# and Scripts/bench-uplink-drain; Scripts/lib/servers.py (fleet-test, bench-fleet) and
# Tests/TestSupport/TestBroker.swift run start-broker themselves.
#
# On 127.0.0.1, anonymous, no persistence unless asked for, in a directory of its own. No queue
# limit for subscribers (mosquitto drops QoS 1 messages past 1,000 queued for a slow subscriber
# by default; a benchmark's or a fleet's subscriber must see every one).
#
#   broker_configure DIR [LINE...]  writes DIR/mosquitto.conf: the common lines, then LINE...
#                                   (later lines win: "persistence true", listeners and their
#                                   options); start-broker's
#   broker_launch DIR               starts mosquitto on DIR's configuration and waits until every
#                                   listener accepts; with no listener it adds one on a free port
#                                   (20 tries); sets broker_pid and broker_ports; start-broker's
#   broker_start DIR                for scripts: start-broker DIR owned by this shell; sets
#                                   broker_port (the first listener's), broker_pid and
#                                   broker_helper (start-broker's pid)
#   broker_stop                     stops it (SIGTERM: persistence is saved) and waits
#   broker_ticks                    the broker's CPU time so far (utime + stime, clock ticks)

broker_executable=/usr/sbin/mosquitto
broker_library="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
broker_pid=
broker_port=
broker_ports=()
broker_helper=

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

broker_configure() {
    local dir="$1"; shift
    # Started as root, mosquitto becomes its own user: it must be able to enter the directory.
    chmod 777 "$dir"
    printf '%s\n' "per_listener_settings false" "allow_anonymous true" "persistence false" "max_queued_messages 0" \
        "log_dest file $dir/broker.log" "log_type error" "log_type warning" "$@" >"$dir/mosquitto.conf"
}

# Starts mosquitto on DIR/mosquitto.conf and waits (10 s at most) until every listener accepts.
broker_try() {
    local dir="$1" port
    "$broker_executable" -c "$dir/mosquitto.conf" </dev/null >/dev/null 2>&1 &
    broker_pid=$!
    for port in "${broker_ports[@]}"; do
        for _ in $(seq 500); do
            accepts "$port" && continue 2
            kill -0 "$broker_pid" 2>/dev/null || break
            sleep 0.02
        done
        kill -KILL "$broker_pid" 2>/dev/null
        wait "$broker_pid" 2>/dev/null
        broker_pid=
        return 1
    done
    return 0
}

broker_launch() {
    local dir="$1" port attempt
    [ -x "$broker_executable" ] || { echo "broker: $broker_executable is missing: run Scripts/install-deps --test (Debian package mosquitto)" >&2; return 1; }
    mapfile -t broker_ports < <(awk '$1 == "listener" { print $2 }' "$dir/mosquitto.conf")
    if [ "${#broker_ports[@]}" -gt 0 ]; then
        broker_try "$dir" && return 0
    else
        cp "$dir/mosquitto.conf" "$dir/mosquitto.conf.base"
        for attempt in $(seq 20); do
            port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
            accepts "$port" && continue
            { cat "$dir/mosquitto.conf.base"; echo "listener $port 127.0.0.1"; } >"$dir/mosquitto.conf"
            broker_ports=("$port")
            broker_try "$dir" && return 0
        done
    fi
    echo "broker: mosquitto did not listen on 127.0.0.1 (${broker_ports[*]}): $(tail -5 "$dir/broker.log" 2>/dev/null)" >&2
    return 1
}

broker_start() {
    local dir="$1"
    rm -f "$dir/broker.ready"
    "$broker_library/start-broker" --owner $$ "$dir" </dev/null &
    broker_helper=$!
    while [ ! -s "$dir/broker.ready" ]; do
        kill -0 "$broker_helper" 2>/dev/null || { wait "$broker_helper"; broker_helper=; return 1; }
        sleep 0.02
    done
    read -r broker_pid broker_port _ <"$dir/broker.ready"
}

broker_stop() {
    [ -n "${broker_helper:-}" ] || return 0
    kill -TERM "$broker_pid" 2>/dev/null || true
    wait "$broker_helper" 2>/dev/null || true
    broker_helper= broker_pid=
}

# CPU time of a process so far, clock ticks (fields 14 and 15 of /proc/PID/stat; the command name
# in field 2 has no spaces here).
process_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
broker_ticks() { process_ticks "$broker_pid"; }
