# A local MQTT broker for the benchmarks (sourced by Scripts/bench and Scripts/bench-uplink-drain):
# Debian's mosquitto on 127.0.0.1, anonymous, no persistence, in a directory of its own, on a
# free port. No queue limit for subscribers (mosquitto drops QoS 1 messages past 1,000 queued for
# a slow subscriber by default; the drain benchmark's subscriber must see every one).
#
#   broker_start DIR   starts it; sets broker_port and broker_pid (fails after 20 ports)
#   broker_stop        stops it
#   broker_ticks       the broker's CPU time so far (utime + stime, clock ticks)

broker_executable=/usr/sbin/mosquitto

accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

broker_start() {
    local dir="$1" port attempt
    [ -x "$broker_executable" ] || { echo "bench: $broker_executable is missing: run Scripts/install-deps --test (Debian package mosquitto)" >&2; return 1; }
    # Started as root, mosquitto becomes its own user: it must be able to enter the directory.
    chmod 777 "$dir"
    for attempt in $(seq 20); do
        port=$(( 20000 + (RANDOM * 32768 + RANDOM) % 40000 ))
        accepts "$port" && continue
        printf '%s\n' "per_listener_settings false" "allow_anonymous true" "persistence false" "max_queued_messages 0" \
            "log_dest file $dir/broker.log" "log_type error" "log_type warning" "listener $port 127.0.0.1" >"$dir/mosquitto.conf"
        "$broker_executable" -c "$dir/mosquitto.conf" >/dev/null 2>&1 &
        broker_pid=$!
        for _ in $(seq 250); do
            accepts "$port" && { broker_port=$port; return 0; }
            kill -0 "$broker_pid" 2>/dev/null || break
            sleep 0.02
        done
        kill "$broker_pid" 2>/dev/null || true
        wait "$broker_pid" 2>/dev/null || true
    done
    echo "bench: mosquitto did not start on 127.0.0.1: $(cat "$dir/broker.log" 2>/dev/null)" >&2
    return 1
}

broker_stop() {
    [ -n "${broker_pid:-}" ] || return 0
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
    broker_pid=
}

# CPU time of a process so far, clock ticks (fields 14 and 15 of /proc/PID/stat; the command name
# in field 2 has no spaces here).
process_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
broker_ticks() { process_ticks "$broker_pid"; }
