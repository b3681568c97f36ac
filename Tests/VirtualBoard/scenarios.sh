#!/bin/sh
# The virtual board's scenarios, run by /init inside the guest. Checks print 'ok    ...' or
# 'FAIL  ...'; 'vboard: ...' lines ask the host for NMEA, report GPIO changes, and ask for the
# checks that need the host's clock (see host.py). GPIO levels are read where the kernel keeps
# them, gpio-sim's sim_gpioN/value, not from the agent.
G=$VBOARD_GPIO
RELAY1=3
RELAY2=4    # active low: on is 0 in the kernel
BUZZER=5
MOTION=6
BTPOWER=7
IBEACON=02011a1aff4c000215e2c56db5dffb48d2b060d0f5a71096e000640000c5   # major 100, minor 0
# The gateway's own beacon ([bluetooth] advertise) and the 30 octets a controller must get for it:
# Flags 06, then Apple's iBeacon with the UUID, major 1, minor 2 (big-endian) and -59 dBm (c5).
OWN_BEACON=2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6/1/2
OWN_DATA=0201061aff4c0002152f234454cf6d4a0fadf2f4911ba9ffa600010002c5
ADVERTISE='[bluetooth]
advertise = "2F234454-CF6D-4A0F-ADF2-F4911BA9FFA6/1/2"
advertise_power = -59
advertise_interval = "500ms"'
mkdir -p /sites

ok() { echo "ok    $*"; }
fail() { echo "FAIL  $*"; }
check() { # DESCRIPTION COMMAND...
    description="$1"; shift
    if "$@"; then ok "$description"; else fail "$description"; fi
}

# wait_for SECONDS FILE PATTERN: true as soon as FILE has a line matching PATTERN.
wait_for() {
    tries=$(($1 * 10))
    while [ $tries -gt 0 ]; do
        grep -q "$3" "$2" 2>/dev/null && return 0
        usleep 100000
        tries=$((tries - 1))
    done
    return 1
}

value() { cat "$G/sim_gpio$1/value"; }
uptime_s() { read up rest < /proc/uptime; echo "$up"; }

# sample NAME LINE: prints every level change of LINE (to the console, for the host's clock, and
# to /tmp/lines with the guest's uptime) until killed. Every 10 ms: a 500 ms pulse is ~50 reads.
# The pause is a read timing out on a FIFO no one writes: no process started per sample.
sample() {
    last=x
    mkfifo /tmp/pause.$1
    while :; do
        read level < "$G/sim_gpio$2/value"
        if [ "$level" != "$last" ]; then
            read up rest < /proc/uptime
            echo "vboard: line $1 $level $up"
            echo "$1 $level $up" >> /tmp/lines
            last=$level
        fi
        read -t 0.01 nothing <> /tmp/pause.$1
    done
}

# site NAME: the site file /sites/NAME.toml from standard input, after a common head.
site() {
    { printf 'board = "/etc/board.toml"\nstate_dir = "/state/%s"\n[capacity]\nconditions = 8\nevents = 32\n' "$1"; cat; } > /sites/$1.toml
}

BERTH='[[monitor.harbour.condition]]
id = "berth"                             # where the recording starts; left at 09:48:06
circle = { lat = 52.85012, lon = 5.31355, radius = 60.0 }
exit_margin = 10.0
dwell = "3s"
[[action]]
when = "harbour/berth"
state = "satisfied"
gpio = "relay1"
mode = "level"'

CRATE='[[monitor.cargo.condition]]
id = "anyCrate"                          # a wildcard: the event names the crate seen
beacon = { uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0" }
exit_timeout = "3s"
[[action]]
when = "cargo/*"
state = "any"
gpio = "buzzer"
mode = "pulse"
pulse = "500ms"'

# agent NAME ERRFILE: starts `locus run` on /sites/NAME.toml; its pid in $AGENT.
agent() {
    locus run --config /sites/$1.toml 2>> "$2" &
    AGENT=$!
}

# controller SCHEDULE [-x]: a virtual LE controller; its output in /tmp/vhci.
controller() {
    vhci-controller $2 "$1" > /tmp/vhci &
    CONTROLLER=$!
    wait_for 5 /tmp/vhci "vhci: hci0"
}

# finish: stops what the scenario started and shows the agent's standard error in the console log.
finish() {
    # Stop the feed while the agent still reads, so no backlog waits in the UART for the next one.
    echo "vboard: feed stop"
    usleep 500000
    kill $AGENT $CONTROLLER $SAMPLERS 2>/dev/null
    [ -z "$AGENT" ] || wait $AGENT 2>/dev/null   # a bare `wait` would wait for dbus-daemon too
    for file in /tmp/*.err; do sed "s|^|  $file: |" "$file"; done
    for state in /state/*; do locus log export --state $state | grep '"type":"gpio"' | sed "s|^|  $state: |"; done
    rm -rf /state/*
    sed 's/^/  /' /tmp/vhci
    rm -f /tmp/*.err /tmp/lines /tmp/vhci /tmp/pause.*
    AGENT= CONTROLLER= SAMPLERS=
}

# fix_time < EVENT-LINES: the hhmmss of the first event's date (GNSS time: the fix's own time).
fix_time() { sed -n 's/.*T\([0-9][0-9]\):\([0-9][0-9]\):\([0-9][0-9]\)\..*/\1\2\3/p' | head -1; }

scenario_fence() {
    echo "vboard: scenario 1: recorded NMEA at real speed crosses a fence; the relay follows"
    site s1 <<EOF
$BERTH
EOF
    : > /tmp/s1.err
    controller /dev/null
    sample relay1 $RELAY1 & SAMPLERS=$!
    agent s1 /tmp/s1.err
    check "agent reads the GNSS UART" wait_for 10 /tmp/s1.err "gnss: reading /dev/ttyS"
    # The agent has the port open and raw: only now may the host send (bytes that arrive earlier
    # are echoed back by the tty and stall the open for seconds).
    echo "vboard: feed 094737 094810"
    check "harbour/berth satisfied after the dwell" wait_for 30 /tmp/s1.err "event .*harbour/berth .*satisfied"
    usleep 300000
    check "relay1 is on in the kernel (sim_gpio$RELAY1 = 1)" test "$(value $RELAY1)" = 1
    echo "vboard: latency relay1 1 $(grep 'harbour/berth .* satisfied' /tmp/s1.err | fix_time) 2000"
    check "harbour/berth unsatisfied on leaving" wait_for 40 /tmp/s1.err "event .*harbour/berth .*unsatisfied"
    usleep 300000
    check "relay1 is off in the kernel (sim_gpio$RELAY1 = 0)" test "$(value $RELAY1)" = 0
    echo "vboard: latency relay1 0 $(grep 'harbour/berth .*unsatisfied' /tmp/s1.err | fix_time) 2000"
    check "both events are in the log" test "$(locus events --state /state/s1 | grep -c '"identifier":"berth"')" = 2
    # Besides the two changes, the start logged the line's level (cause "restored", off).
    check "the log has a gpio record per change" test "$(locus log export --state /state/s1 | grep '"type":"gpio","output":"relay1"' | grep -vc '"cause":"restored"')" = 2
    check "the log has relay1's level at start" test "$(locus log export --state /state/s1 | grep '"type":"gpio","output":"relay1"' | grep -c '"value":false,"cause":"restored"')" = 1
    finish
}

scenario_beacon() { # [-x]: extended scanning
    mode=legacy
    [ "$1" = -x ] && mode=extended
    echo "vboard: scenario 2: iBeacon advertisements ($mode reports) satisfy a wildcard condition, then time out"
    site s2$mode <<EOF
$ADVERTISE
$CRATE
EOF
    # One crate advertising every 300 ms for 4 s after scanning starts, then silent.
    echo "0 4000 300 6A:6B:C9:A2:3E:43 -60 $IBEACON" > /tmp/schedule
    : > /tmp/s2.err
    controller /tmp/schedule $1
    sample buzzer $BUZZER & SAMPLERS=$!
    agent s2$mode /tmp/s2.err
    check "agent scans with $mode scan commands" wait_for 10 /tmp/s2.err "scanning with $mode scan commands"
    # The site's tier (hundredMeters, the default) scans 30 ms of every 120 ms: 48 and 192 units.
    check "the controller got the tier's scan timing: interval 192, window 48 (x 0.625 ms)" \
        wait_for 5 /tmp/vhci "vhci: scan parameters interval 192 window 48"
    check "cargo/anyCrate satisfied" wait_for 10 /tmp/s2.err "event .*cargo/anyCrate .*satisfied"
    check "the agent advertises its own beacon" wait_for 5 /tmp/s2.err "advertising iBeacon $OWN_BEACON: on ($mode advertising commands)"
    if [ $mode = legacy ]; then
        check "the controller got LE Set Advertising Parameters: 800 units (500 ms), ADV_NONCONN_IND, public, channels 37-39" \
            grep -q "vhci: advertising parameters interval 800 800 type 3 own 0 channels 7" /tmp/vhci
        check "the controller got our iBeacon's exact 30 octets (LE Set Advertising Data)" grep -q "vhci: advertising data 30 $OWN_DATA\$" /tmp/vhci
        check "and LE Set Advertising Enable on" grep -q "vhci: advertising on$" /tmp/vhci
    else
        check "the controller got LE Set Extended Advertising Parameters: legacy ADV_NONCONN_IND (0x0010), 800 units, channels 37-39" \
            grep -q "vhci: extended advertising parameters handle 1 properties 0x0010 interval 800 800 channels 7 own 0" /tmp/vhci
        check "the controller got our iBeacon's exact 30 octets (LE Set Extended Advertising Data)" \
            grep -q "vhci: advertising data 30 $OWN_DATA (extended, handle 1)" /tmp/vhci
        check "and LE Set Extended Advertising Enable on" grep -q "vhci: advertising on (extended, handle 1)" /tmp/vhci
        check "no legacy advertising command beside the extended scan" sh -c "! grep -q 'vhci: advertising parameters\|vhci: advertising on\$' /tmp/vhci"
    fi
    check "locus status: advertising on" advertising_on s2$mode
    check "the event's refinement names the crate: major 100 minor 0" \
        sh -c "locus events --state /state/s2$mode | grep '\"state\":\"satisfied\"' | grep -q '\"major\":100,\"minor\":0'"
    check "cargo/anyCrate unsatisfied after the exit timeout" wait_for 15 /tmp/s2.err "event .*cargo/anyCrate .*unsatisfied"
    last=$(grep -c 'vhci: report' /tmp/vhci)
    check "the controller sent its reports ($last)" test "$last" -ge 10
    check "the unsatisfied event's refinement is reset" \
        sh -c "locus events --state /state/s2$mode | grep '\"state\":\"unsatisfied\"' | grep -q '\"refinement\":null'"
    usleep 800000
    # Two pulses (satisfied, unsatisfied); the first one's width from the sampled levels.
    width=$(awk '$1 == "buzzer" && $2 == 1 && !on { on = $3 } $1 == "buzzer" && $2 == 0 && on && !off { off = $3 }
                 END { if (on && off) printf "%d", (off - on) * 1000 }' /tmp/lines)
    check "buzzer pulsed for 500 ms in the kernel (sampled: ${width:-no pulse} ms, 400-650 allowed)" \
        test "${width:-0}" -ge 400 -a "${width:-0}" -le 650
    check "two pulses, one per event" test "$(grep -c '^buzzer 1' /tmp/lines)" = 2
    kill $AGENT; wait $AGENT 2>/dev/null
    check "stopped: the agent turned advertising off" grep -q "vhci: advertising off" /tmp/vhci
    finish
}

scenario_phone() {
    echo "vboard: scenario 2p: a phone's rotating private addresses resolved with its key; a stranger's are not"
    # The Bluetooth specification's sample key (Vol 3 Part H, D.7): its sample address
    # 70:81:94:0D:FB:AA, then 4A:BC:DE:88:C9:C4 (ah(key, 4abcde), computed with Python's
    # cryptography); a stranger's address under another key (51:11:11:91:E7:25).
    printf '[alice]\nirk = "ec0234a357c8ad05341010a60a397d9b"\n' > /sites/phones
    chmod 600 /sites/phones
    site s2p <<EOF
[phones]
keys = "/sites/phones"
[[monitor.home.condition]]
id = "alice"
phone = "alice"
exit_timeout = "3s"
EOF
    apple=02011a07ff4c0010020b00
    { echo "0 3000 300 70:81:94:0D:FB:AA -60 $apple"; echo "3000 6000 300 4A:BC:DE:88:C9:C4 -61 $apple"
      echo "0 6000 400 51:11:11:91:E7:25 -70 $apple"; } > /tmp/schedule
    : > /tmp/s2p.err
    controller /tmp/schedule
    agent s2p /tmp/s2p.err
    check "home/alice satisfied by the phone's first address" wait_for 10 /tmp/s2p.err "event .*home/alice .*satisfied"
    locus status --state /state/s2p > /tmp/status 2>&1
    check "the agent resolves the phone's reports (status: bluetooth.phones)" grep -q '"phones":{"keys":1,"sightings":[1-9]' /tmp/status
    check "home/alice unsatisfied 3 s after its second address falls silent" wait_for 20 /tmp/s2p.err "event .*home/alice .*unsatisfied"
    check "one visit across the change of address (one satisfied event)" \
        test "$(locus events --state /state/s2p | grep -c '"state":"satisfied"')" = 1
    locus log export --state /state/s2p > /tmp/export
    check "the log names the phone" grep -q '"phone":"alice"' /tmp/export
    check "and never its key" sh -c "! grep -qi ec0234a357c8ad05 /tmp/export /tmp/s2p.err"
    rm -f /tmp/status /tmp/export /sites/phones
    finish
}

scenario_crash() {
    echo "vboard: scenario 3: kill -9 and restart: GPIO restored from the log, no event lost"
    site s3 <<EOF
$BERTH
EOF
    : > /tmp/s3.err
    controller /dev/null
    sample relay1 $RELAY1 & SAMPLERS=$!
    agent s3 /tmp/s3.err
    wait_for 10 /tmp/s3.err "gnss: reading"
    echo "vboard: feed 094737 094810"
    check "harbour/berth satisfied, relay1 on" wait_for 30 /tmp/s3.err "gpio relay1 on"
    locus events --state /state/s3 > /tmp/before
    kill -9 $AGENT
    wait $AGENT 2>/dev/null
    usleep 200000
    check "killed: the kernel released relay1 (back to its pull, 0)" test "$(value $RELAY1)" = 0
    : > /tmp/s3-restart.err
    agent s3 /tmp/s3-restart.err
    check "restarted: relay1 restored from the log" wait_for 10 /tmp/s3-restart.err "gpio relay1 on (restored from the log)"
    check "relay1 is on again in the kernel" test "$(value $RELAY1)" = 1
    restored=$(grep -n 'restored from the log' /tmp/s3-restart.err | head -1 | cut -d: -f1)
    first_event=$(grep -n 'event ' /tmp/s3-restart.err | head -1 | cut -d: -f1)
    check "restored before any new event" test "${first_event:-999999}" -gt "$restored"
    check "restarted agent decides: harbour/berth unsatisfied" wait_for 40 /tmp/s3-restart.err "event .*harbour/berth .*unsatisfied"
    locus events --state /state/s3 > /tmp/after
    lost=$(grep -vxF -f /tmp/after /tmp/before | wc -l)
    check "every event logged before the kill is still in the log ($(wc -l < /tmp/before) events, $lost lost)" test "$lost" = 0
    check "relay1 off after leaving" test "$(value $RELAY1)" = 0
    finish
}

scenario_recovery() {
    echo "vboard: scenario 4: the HCI adapter goes down and up, the UART stops and resumes"
    site s4 <<EOF
$BERTH
$CRATE
EOF
    echo "0 120000 300 6A:6B:C9:A2:3E:43 -60 $IBEACON" > /tmp/schedule
    : > /tmp/s4.err
    controller /tmp/schedule
    agent s4 /tmp/s4.err
    wait_for 10 /tmp/s4.err "gnss: reading"
    echo "vboard: feed 094737 094750"
    check "cargo/anyCrate satisfied" wait_for 10 /tmp/s4.err "event .*cargo/anyCrate .*satisfied"
    hciconfig hci0 down
    # A raw HCI socket goes quiet when its adapter goes down; the agent asks every 10 s.
    check "agent reports the adapter down" wait_for 20 /tmp/s4.err "bluetooth: hci0: .*went down"
    hciconfig hci0 up 2>/dev/null   # the agent may have brought it up first
    check "agent scans again" sh -c "sleep 1; n=0; while [ \$n -lt 150 ]; do [ \$(grep -c 'scanning with' /tmp/s4.err) -ge 2 ] && exit 0; usleep 100000; n=\$((n+1)); done; exit 1"
    before=$(locus status --state /state/s4 | sed -n 's/.*"sightings":\([0-9]*\).*/\1/p')
    sleep 2
    after=$(locus status --state /state/s4 | sed -n 's/.*"sightings":\([0-9]*\).*/\1/p')
    check "sightings resume after the adapter came back ($before, then $after)" test "${after:-0}" -gt "${before:-0}"
    # Unseen while the adapter was down (longer than the exit timeout), seen again after it.
    check "cargo/anyCrate unsatisfied while the adapter was down, satisfied again after" \
        sh -c "n=0; while [ \$n -lt 100 ]; do [ \$(grep -c 'cargo/anyCrate  *satisfied' /tmp/s4.err) -ge 2 ] && grep -q 'cargo/anyCrate  *unsatisfied' /tmp/s4.err && exit 0; usleep 100000; n=\$((n+1)); done; exit 1"
    check "harbour/berth satisfied before the UART stops" wait_for 20 /tmp/s4.err "event .*harbour/berth .*satisfied"
    # The host's feed ended at 09:47:50: the UART is silent for 6 s, then the recording goes on.
    # (The agent reports a port that goes away, not a silent one: it keeps reading.)
    sleep 6
    fixes=$(locus status --state /state/s4 | sed -n 's/.*"fixes":\([0-9]*\).*/\1/p')
    echo "vboard: feed 094750 094810"
    check "after the UART resumed: harbour/berth unsatisfied on leaving" wait_for 40 /tmp/s4.err "event .*harbour/berth .*unsatisfied"
    check "relay1 off in the kernel" test "$(value $RELAY1)" = 0
    resumed=$(locus status --state /state/s4 | sed -n 's/.*"fixes":\([0-9]*\).*/\1/p')
    check "fixes resumed with the UART ($fixes, then $resumed)" test "${resumed:-0}" -gt "${fixes:-0}"
    finish
}

scenario_input() {
    echo "vboard: scenario 5: the motion input wakes the agent's stationary pause"
    # The kernel side first: gpio-sim's pull is seen as edges by a consumer.
    gpiomon --num-events=2 locus-vboard $MOTION > /tmp/edges &
    monitor=$!
    usleep 500000
    echo pull-up > "$G/sim_gpio$MOTION/pull"
    usleep 300000
    echo pull-down > "$G/sim_gpio$MOTION/pull"
    wait_for 5 /tmp/edges "FALLING"
    kill $monitor 2>/dev/null
    sed 's/^/  /' /tmp/edges
    check "gpiomon sees the motion input rise and fall" sh -c "grep -q RISING /tmp/edges && grep -q FALLING /tmp/edges"

    # The agent: the boat lies at its berth until 09:48:06; with a 10 s stationary window the
    # agent pauses, and the motion line going high wakes it at once.
    site s5 <<EOF
$BERTH
[updates]
stationary_window = "10s"
motion_input = "motion"
EOF
    : > /tmp/s5.err
    controller /dev/null
    agent s5 /tmp/s5.err
    check "agent watches the motion input" wait_for 10 /tmp/s5.err "input motion (line $MOTION) wakes the paused receiver"
    wait_for 10 /tmp/s5.err "gnss: reading"
    echo "vboard: feed 094737 094805"
    check "stationary at the berth: the agent pauses" wait_for 30 /tmp/s5.err "updates: stationary since"
    check "locus status: the agent has paused" sh -c "locus status --state /state/s5 | grep -q '\"pause\":\"paused\"'"
    raised=$(uptime_s)
    echo pull-up > "$G/sim_gpio$MOTION/pull"
    check "the motion input wakes the receiver" wait_for 5 /tmp/s5.err "waking the receiver (motion input)"
    woke=$(uptime_s)
    echo "vboard: note motion wake seen after $(awk "BEGIN { printf \"%d\", ($woke - $raised) * 1000 }") ms (the log polled every 100 ms)"
    check "locus status: one motion wake, the receiver held awake" \
        sh -c "locus status --state /state/s5 | grep -q '\"pause\":\"held awake (motion input)\",\"probes\":[0-9]*,\"motion_wakes\":1'"
    echo pull-down > "$G/sim_gpio$MOTION/pull"
    finish
}

# bluetoothd: a system bus and bluetoothd in the foreground (it powers the adapter itself, as on
# a gateway image); their output in /tmp/dbus.log and /tmp/bluetoothd.log.
bluetoothd_start() {
    if [ ! -f /etc/machine-id ]; then
        echo 'root:x:0:0:root:/:/bin/sh' > /etc/passwd   # /etc/group is init's
        echo 5a1b0c2d3e4f5a6b7c8d9e0f1a2b3c4d > /etc/machine-id
        mkdir -p /run/dbus /var/lib/bluetooth
        ln -s /run /var/run
        dbus-daemon --config-file=/etc/dbus-system.conf --nofork --nopidfile > /tmp/dbus.log 2>&1 &
        DBUS=$!
        n=0; while [ ! -S /run/dbus/system_bus_socket ] && [ $n -lt 50 ]; do usleep 100000; n=$((n+1)); done
    fi
    bluetoothd -n -d >> /tmp/bluetoothd.log 2>&1 &
    BLUETOOTHD=$!
}

sightings() { locus status --state /state/$1 | sed -n 's/.*"sightings":\([0-9]*\).*/\1/p'; }
# rising NAME BEFORE SECONDS: true when the sightings count goes above BEFORE within SECONDS.
rising() {
    n=$(($3 * 10))
    while [ $n -gt 0 ]; do [ "$(sightings $1)" -gt "$2" ] 2>/dev/null && return 0; usleep 100000; n=$((n - 1)); done
    return 1
}
# readded SECONDS: the agent added its monitor again after the removal it logged.
readded() {
    n=$(($1 * 10))
    while [ $n -gt 0 ]; do
        sed -n '/another program removed/,$p' /tmp/s6.err | grep -q 'adding the advertisement monitor again' && return 0
        usleep 100000; n=$((n - 1))
    done
    return 1
}
elapsed_since() { awk "BEGIN { printf \"%.1f\", $(uptime_s) - $1 }"; }
# vhci_after SECONDS MARK PATTERN: true once /tmp/vhci has a line matching PATTERN after the last
# line matching MARK (a fixed string).
vhci_after() {
    n=$(($1 * 10))
    while [ $n -gt 0 ]; do
        awk -v mark="$2" 'index($0, mark) { after = ""; seen = 1; next } seen { after = after $0 "\n" } END { printf "%s", after }' /tmp/vhci \
            | grep -q "$3" && return 0
        usleep 100000; n=$((n - 1))
    done
    return 1
}
# vhci_since SECONDS LINE PATTERN: true once /tmp/vhci has a line matching PATTERN after line LINE.
vhci_since() {
    n=$(($1 * 10))
    while [ $n -gt 0 ]; do
        tail -n +$(($2 + 1)) /tmp/vhci | grep -q "$3" && return 0
        usleep 100000; n=$((n - 1))
    done
    return 1
}
advertising_on() { locus status --state /state/$1 | grep -q '"advertising":{"state":"on ('; }

scenario_bluetoothd() {
    echo "vboard: scenario 6: beside bluetoothd: the kernel scans for both, through a discovery and a bluetoothd restart"
    site s6 <<EOF
$ADVERTISE
$CRATE
EOF
    echo "0 300000 300 6A:6B:C9:A2:3E:43 -60 $IBEACON" > /tmp/schedule
    : > /tmp/s6.err
    : > /tmp/bluetoothd.log
    controller /tmp/schedule
    t0=$(uptime_s)
    bluetoothd_start
    check "bluetoothd powers hci0 (bluetoothctl show: Powered: yes)" \
        sh -c 'n=0; while [ $n -lt 100 ]; do bluetoothctl show 2>/dev/null | grep -q "Powered: yes" && exit 0; usleep 200000; n=$((n+1)); done; exit 1'
    echo "vboard: note bluetoothd up and hci0 powered after $(elapsed_since $t0) s"
    agent s6 /tmp/s6.err
    check "scan = auto chooses the kernel mode and names bluetoothd" wait_for 10 /tmp/s6.err "scan = auto: kernel mode (beside bluetoothd)"
    check "the agent scans through the kernel's advertisement monitor" wait_for 10 /tmp/s6.err "scanning through the kernel's advertisement monitor"
    check "cargo/anyCrate satisfied" wait_for 10 /tmp/s6.err "event .*cargo/anyCrate .*satisfied"
    check "the monitor's address and handle are kept in the state directory" grep -q "^C0:0C:B0:00:00:01 [0-9]" /state/s6/bluetooth-monitor
    check "the kernel advertises our beacon (an mgmt instance)" \
        wait_for 5 /tmp/s6.err "advertising iBeacon $OWN_BEACON: on (mgmt advertising instance [0-9]"
    check "the controller got our iBeacon's exact 30 octets from the kernel (it writes the Flags)" \
        wait_for 5 /tmp/vhci "vhci: advertising data 30 $OWN_DATA\$"
    check "and advertising on" wait_for 5 /tmp/vhci "vhci: advertising on$"
    echo "vboard: note kernel advertising: $(grep 'vhci: advertising parameters' /tmp/vhci | tail -1)"
    check "locus status: mode kernel, bluetoothd among the co-users" \
        sh -c "locus status --state /state/s6 | grep -q '\"mode\":\"kernel\",\"scanning\":true,\"losses\":0,\"co_users\":\[[^]]*bluetoothd'"
    before=$(sightings s6)
    t0=$(uptime_s)
    bluetoothctl --timeout 8 scan on > /tmp/btctl 2>&1 &
    scan=$!
    usleep 4000000
    during=$(sightings s6)
    wait $scan
    echo "vboard: note bluetoothctl scan on ran $(elapsed_since $t0) s"
    check "bluetoothd's discovery works beside the agent (bluetoothctl: Discovery started, the crate found)" \
        sh -c "grep -q 'Discovery started' /tmp/btctl && grep -q 'NEW.* Device 6A:6B:C9:A2:3E:43' /tmp/btctl"
    check "sightings keep rising during the discovery ($before, then $during)" test "${during:-0}" -gt "${before:-0}"
    after=$(sightings s6)
    check "sightings keep rising after the discovery ended (from $after)" rising s6 "${after:-0}" 3
    check "bluetoothctl show: still Powered: yes" sh -c "bluetoothctl show | grep -q 'Powered: yes'"
    kill $BLUETOOTHD; wait $BLUETOOTHD 2>/dev/null
    restart_line=$(wc -l < /tmp/vhci)
    t0=$(uptime_s)
    bluetoothd_start
    check "bluetoothd's restart removes every monitor (handle 0); the agent hears it" \
        wait_for 15 /tmp/s6.err "another program removed the advertisement monitor"
    check "the agent adds its monitor again once bluetoothd has powered hci0" readded 15
    echo "vboard: note monitor re-added $(elapsed_since $t0) s after bluetoothd restarted"
    check "locus status: one monitor re-add" sh -c "locus status --state /state/s6 | grep -q '\"monitor_readds\":1'"
    # BlueZ 5.66 keeps the instance across its restart (newer bluetoothd removes every instance at
    # start, which the agent answers with an Add); either way the beacon must be back on the air.
    echo "vboard: note advertising instance removed by bluetoothd's restart: $(grep -c 'another program removed advertising instance' /tmp/s6.err)"
    check "the controller advertises our beacon again after bluetoothd's restart" \
        vhci_since 10 "$restart_line" "vhci: advertising on$"
    check "locus status: advertising on" advertising_on s6
    restarted=$(sightings s6)
    check "sightings resume after the re-add (from $restarted)" rising s6 "${restarted:-0}" 5
    check "no scan command refused, no restart warning" sh -c "! grep -q 'Command Disallowed\|retrying' /tmp/s6.err"
    kill $AGENT; wait $AGENT 2>/dev/null   # finish kills it again: a bare `wait` would wait for dbus-daemon
    check "stopped: the agent removed its monitor and forgot it" \
        sh -c "! grep -q 'stopping the scan' /tmp/s6.err && test ! -e /state/s6/bluetooth-monitor"
    kill $BLUETOOTHD 2>/dev/null; wait $BLUETOOTHD 2>/dev/null
    grep -v '^\s*$' /tmp/btctl | head -12 | sed 's|^|  /tmp/btctl: |'
    grep -i 'error\|fail' /tmp/bluetoothd.log | head -12 | sed 's/^/  bluetoothd: /'
    finish
}

scenario_healing() {
    echo "vboard: scenario 7: a silent adapter healed step by step (raw mode)"
    site s7 <<EOF
$ADVERTISE
[health]
ble_silence = "10s"
settle = "4s"
rounds = 1
$CRATE
EOF
    echo "0 600000 300 6A:6B:C9:A2:3E:43 -60 $IBEACON" > /tmp/schedule
    echo ok > /tmp/fault
    # The supply line reads 1 before the agent requests it, as a pulled-up enable pin would.
    echo pull-up > "$G/sim_gpio$BTPOWER/pull"
    vhci-controller -c /tmp/fault -p "$G/sim_gpio$BTPOWER/value" /tmp/schedule > /tmp/vhci &
    CONTROLLER=$!
    wait_for 5 /tmp/vhci "vhci: hci0"
    : > /tmp/s7.err
    agent s7 /tmp/s7.err
    check "the agent scans" wait_for 10 /tmp/s7.err "scanning with"
    check "cargo/anyCrate satisfied" wait_for 10 /tmp/s7.err "event .*cargo/anyCrate .*satisfied"
    check "the agent holds the supply line on (sim_gpio$BTPOWER = 1)" test "$(value $BTPOWER)" = 1

    # A radio that needs a reset: restarting the scan does not bring it back, the kernel's
    # controller reset (mgmt power off and on: HCI Reset first) does.
    t0=$(uptime_s)
    echo deaf-until-reset > /tmp/fault
    check "the silence noticed; the scan restarted (step 1 of 4)" \
        wait_for 20 /tmp/s7.err "hci0: no advertising report for 1[0-9] s; scan restart (step 1 of 4, round 1 of 1)"
    check "then the controller reset (step 2 of 4)" wait_for 15 /tmp/s7.err "; controller reset (step 2 of 4, round 1 of 1)"
    check "the controller got its HCI Reset" wait_for 10 /tmp/vhci "HCI Reset clears the fault"
    check "healed by the controller reset" wait_for 15 /tmp/s7.err "advertisements again after .*; healed by the controller reset (round 1)"
    check "advertising is on again after the HCI Reset (data, then enable)" vhci_after 5 "HCI Reset clears the fault" "vhci: advertising on$"
    check "with our iBeacon's exact octets" vhci_after 1 "HCI Reset clears the fault" "vhci: advertising data 30 $OWN_DATA\$"
    echo "vboard: note deaf until reset: healed $(elapsed_since $t0) s after the fault"

    # A hung controller that answers nothing: every step up to the supply line's power cut.
    t0=$(uptime_s)
    echo mute > /tmp/fault
    check "a hung controller: the power cycle (step 4 of 4) after the others" \
        wait_for 90 /tmp/s7.err "power cycle (gpio bt_power, 1s off) (step 4 of 4, round 1 of 1)"
    check "the adapter down and up was tried before (step 3 of 4)" grep -q "adapter down and up (step 3 of 4" /tmp/s7.err
    check "the controller lost its supply" wait_for 5 /tmp/vhci "vhci: power off"
    check "and got it back" wait_for 10 /tmp/vhci "vhci: power on"
    check "healed by the power cycle" wait_for 30 /tmp/s7.err "advertisements again after .*; healed by the power cycle (round 1)"
    check "advertising is on again after the power cycle" vhci_after 5 "vhci: power on" "vhci: advertising on$"
    check "with our iBeacon's exact octets" vhci_after 1 "vhci: power on" "vhci: advertising data 30 $OWN_DATA\$"
    check "locus status: advertising on, no refusal" \
        sh -c "locus status --state /state/s7 | grep -q '\"advertising\":{\"state\":\"on ([^}]*\"refusals\":0}'"
    echo "vboard: note hung controller: healed $(elapsed_since $t0) s after the fault"
    check "locus status credits the reset and the power cycle" \
        sh -c "locus status --state /state/s7 | grep -q '\"healed_by\":{\"rescan\":0,\"reset\":1,\"down_up\":0,\"power\":1}'"
    check "the power cut is in the event log, both moves with cause heal" \
        sh -c "test \$(locus log export --state /state/s7 | grep '\"output\":\"bt_power\"' | grep -c '\"cause\":\"heal\"') = 2"
    echo pull-down > "$G/sim_gpio$BTPOWER/pull"
    finish
}

# doctor NAME: `locus doctor` on /sites/NAME.toml; its lines (shown indented) in /tmp/doctor, its
# exit status in $DOCTOR_EXIT.
doctor() {
    locus doctor --config /sites/$1.toml > /tmp/doctor 2>&1
    DOCTOR_EXIT=$?
    sed "s|^|  doctor $1 (exit $DOCTOR_EXIT): |" /tmp/doctor
}
clean() { test "$DOCTOR_EXIT" = 0 && ! grep -q '^FAIL' /tmp/doctor; }
# only_failure PATTERN: doctor exited 1 with one FAIL line, and that line matches PATTERN.
# When it is not, doctor's lines go to the host's output too, so that CI's log shows why.
only_failure() {
    test "$DOCTOR_EXIT" = 1 && test "$(grep -c '^FAIL' /tmp/doctor)" = 1 && grep '^FAIL' /tmp/doctor | grep -q "$1" && return 0
    sed "s|^|vboard: note doctor (exit $DOCTOR_EXIT): |" /tmp/doctor
    return 1
}
# variant NAME FROM SED: /sites/NAME.toml is /sites/FROM.toml edited by SED.
variant() { sed "$3" /sites/$2.toml > /sites/$1.toml; }

scenario_doctor() {
    echo "vboard: scenario 8: locus doctor on a clean board, then one fault at a time"
    site s8 <<EOF
$BERTH
$CRATE
EOF
    mkdir -p /state/s8
    controller /dev/null
    echo "vboard: feed 094737 095003"
    doctor s8
    check "a clean board: exit 0, no FAIL" clean

    rfkill=$(ls -d /sys/class/bluetooth/hci0/rfkill* | head -1)
    echo 1 > $rfkill/soft
    doctor s8
    check "hci0 soft-blocked by rfkill: exit 1, that FAIL alone" only_failure "bluetooth: hci0 is blocked by rfkill (soft)"
    echo 0 > $rfkill/soft

    gpioset --mode=signal locus-vboard $RELAY1=1 &
    holder=$!
    usleep 300000
    doctor s8
    check "the relay's line held by gpioset: exit 1, that FAIL alone" \
        only_failure "gpio: relay1 (line $RELAY1 of .*) is held by 'gpioset'"
    kill $holder; wait $holder 2>/dev/null

    hci-exclusive 0 > /tmp/exclusive 2>&1 &
    holder=$!
    check "hci-exclusive holds hci0 through the HCI user channel" wait_for 5 /tmp/exclusive "hci0 held"
    doctor s8
    check "an HCI user-channel holder: exit 1, that FAIL alone, naming it" \
        only_failure "bluetooth: hci0 is held through the HCI user channel by 'hci-exclusive'"
    kill $holder; wait $holder 2>/dev/null

    # The host's receiver sends at 38400 baud; a UART set to 9600 reads framing garbage.
    sed 's/^baud = 38400/baud = 9600/' /etc/board.toml > /etc/board-9600.toml
    variant s8-9600 s8 's|/etc/board.toml|/etc/board-9600.toml|'
    # The port at 9600 before doctor opens it, and a second for qemu and the host to follow: a
    # loaded guest opening the port at its old rate can take in a clean epoch before its own
    # switch reaches the host, which a real line at the wrong rate never delivers.
    stty -F "$(sed -n 's|^device = "\(/dev/[^"]*\)".*|\1|p' /etc/board.toml)" 9600 && sleep 1
    doctor s8-9600
    check "the board file says 9600 baud: exit 1, that FAIL alone, naming 38400" \
        only_failure "gnss bytes: no NMEA at 9600 baud .*; the receiver sends NMEA at 38400 baud"

    mkdir -p /state/ro
    mount -t tmpfs -o ro tmpfs /state/ro
    variant s8-ro s8 's|/state/s8|/state/ro|'
    doctor s8-ro
    check "a read-only state directory: exit 1, that FAIL alone" \
        only_failure "state: cannot write in /state/ro: .*Read-only file system"
    umount /state/ro
    finish
}

# Booted with the GNSS UART as a kernel console too (host.py: console=ttyS0 on arm64, ttyS1 on amd64).
scenario_doctor_console() {
    echo "vboard: scenario 9: locus doctor on a board whose GNSS UART is also a kernel console"
    uart=$(sed -n 's|^device = "/dev/\(.*\)".*|\1|p' /etc/board.toml)
    site s9 <<EOF
$BERTH
EOF
    mkdir -p /state/s9
    controller /dev/null
    echo "vboard: feed 094737 095003"
    if [ "$(uname -m)" = aarch64 ]; then
        check "the kernel writes its console to $uart (/proc/consoles)" grep -q "^$uart " /proc/consoles
    else # one 8250 console: ttyS0 keeps it, ttyS1 is named on the command line only
        check "the kernel command line names $uart as a console" grep -q "console=$uart" /proc/cmdline
    fi
    doctor s9
    check "a console on the GNSS UART: exit 1, that FAIL alone" \
        only_failure "console: $uart is a kernel console (console=$uart on the kernel command line)"
    finish
}

lines_of() { grep -c "^$1 " /tmp/lines; }
# remote_results NAME: each remote record's version or id and result, in log order, on one line.
remote_results() {
    locus log export --state /state/$1 | grep '"type":"remote"' |
        sed -n 's/.*"\(version\|id\)":"*\([^,"]*\)"*.*"result":"\([a-z]*\)".*/\2 \3/p' | tr '\n' ' '
}

# Booted with a network (host.py): the fleet's broker is on the host, its public key on the
# kernel command line. The fleet's messages are signed and published by the host on request.
scenario_steer() {
    echo "vboard: scenario 10: the fleet steers the board over the network: signed configurations and commands"
    ip link set eth0 up && ip addr add 10.0.2.15/24 dev eth0 && ip route add default via 10.0.2.2
    broker=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^vboard_broker=//p')
    { echo "-----BEGIN PUBLIC KEY-----"; tr ' ' '\n' < /proc/cmdline | sed -n 's/^vboard_key=//p' | fold -w 64
      echo "-----END PUBLIC KEY-----"; } > /etc/fleet.pub
    site s10 <<EOF
$BERTH
[uplink]
broker = "mqtt://$broker"
gateway = "vboard"
[remote]
key = "/etc/fleet.pub"
settable = ["monitor", "action"]
commands = ["pulse", "set"]
EOF
    : > /tmp/s10.err
    controller /dev/null
    sample relay1 $RELAY1 & SAMPLERS=$!
    sample buzzer $BUZZER & SAMPLERS="$SAMPLERS $!"
    agent s10 /tmp/s10.err
    check "the uplink reaches the fleet's broker over the network ($broker)" wait_for 30 /tmp/s10.err "uplink: connected to"
    wait_for 10 /tmp/s10.err "gnss: reading /dev/ttyS"
    echo "vboard: feed 094737 094810"
    check "harbour/berth satisfied: relay1 on" wait_for 30 /tmp/s10.err "event .*harbour/berth .*satisfied"
    # No fix after this one: the berth stays satisfied, and only the fleet moves relay1.
    echo "vboard: feed stop"
    usleep 300000
    # Version 1: the berth and its action unchanged, a quay added.
    echo "vboard: steer config 1 fleet quay"
    check "version 1 is applied" wait_for 20 /tmp/s10.err "applied configuration version 1: 2 conditions"
    usleep 300000
    check "relay1 stayed on through the apply (sim_gpio$RELAY1 = 1, no change sampled)" test "$(value $RELAY1)$(lines_of relay1)" = 12
    # Signed with another key: refused, nothing changes.
    echo "vboard: steer config 2 other noaction"
    # (Its version is not read: nothing of a message is believed before its signature.)
    check "version 2, signed with another key, is refused" wait_for 20 /tmp/s10.err "configuration version 0 refused: .*does not verify"
    check "relay1 is still on" test "$(value $RELAY1)" = 1
    # Version 3: the action removed; its line goes to its safe value.
    echo "vboard: steer config 3 fleet noaction"
    check "version 3 is applied" wait_for 20 /tmp/s10.err "applied configuration version 3: 1 conditions, 0 actions"
    usleep 300000
    check "relay1 is off in the kernel once its action is gone" test "$(value $RELAY1)" = 0
    # A pulse, then the same command again: run once.
    echo "vboard: steer command c-1 pulse output=buzzer duration=400ms"
    check "command c-1 pulses the buzzer" wait_for 20 /tmp/s10.err "command c-1: pulse buzzer"
    sleep 1
    echo "vboard: steer command c-1 pulse output=buzzer duration=400ms"
    sleep 2
    check "the buzzer went on and off once in the kernel (sampled: 0 1 0)" test "$(lines_of buzzer)" = 3
    # A latch on the active-low relay2, kept across a kill -9.
    echo "vboard: steer command c-2 set output=relay2 value=on"
    check "command c-2 latches relay2" wait_for 20 /tmp/s10.err "command c-2: relay2 latched on"
    usleep 300000
    check "relay2 is on: 0 in the kernel (active low)" test "$(value $RELAY2)" = 0
    kill -9 $AGENT; wait $AGENT 2>/dev/null
    agent s10 /tmp/s10.err
    check "the agent restarts on version 3 from remote.toml" wait_for 20 /tmp/s10.err "running the fleet's configuration version 3"
    usleep 500000
    check "relay2's latch holds after the restart (0 in the kernel)" test "$(value $RELAY2)" = 0
    check "status: version 3 applied" sh -c "locus status --state /state/s10 | grep -q '\"applied_version\":3'"
    check "the log's remote records: v1 applied, v2 refused, v3 applied, c-1 done, c-2 done" \
        test "$(remote_results s10)" = "1 applied 0 refused 3 applied c-1 done c-2 done "
    finish
}

# The kernel command line's vboard=NAME,NAME... (host.py) chooses the scenarios; all by default.
only=$(tr ' ' '\n' < /proc/cmdline | sed -n 's/^vboard=//p')
if [ -n "$only" ] && [ "$only" != all ]; then
    for name in $(echo "$only" | tr , ' '); do
        case $name in
            beacon_x) scenario_beacon -x ;;
            *) scenario_$name ;;
        esac
    done
else
    scenario_fence
    scenario_beacon
    scenario_beacon -x
    scenario_phone
    scenario_crash
    scenario_recovery
    scenario_input
    scenario_bluetoothd
    scenario_healing
    scenario_doctor
fi
