# The owner of a test server (sourced by Scripts/lib/start-broker and start-postgres): the process
# whose run the server belongs to. A server must not outlive it, however it ends (kill -9
# included, which runs no clean-up of its own), so each helper watches its owner and stops the
# server when the owner is gone.
#
# An owner is named by its pid and its start time (field 22 of /proc/PID/stat, clock ticks since
# boot), so that a pid the kernel has given to a new process is not taken for the owner. A zombie
# (ended, not yet reaped by its parent) is gone.
#
#   owner_identity PID      prints "PID START" (fails when there is no such process)
#   owner_alive PID START   true while that process runs
#   process_running PID     true while PID runs (not ended, not a zombie)
#   owner_pause             half a second, without starting a process (a read that times out)

# Sets process_fields to /proc/PID/stat's fields from the third on (the state is [0], the start
# time [19]); the command name (field 2) may hold spaces and parentheses: fields are counted after
# its ')'. Builtins only: a watcher reads this twice a second.
process_fields=()
read_process_fields() {
    local line
    { read -r line <"/proc/$1/stat"; } 2>/dev/null || return 1
    read -r -a process_fields <<<"${line##*) }"
}

# True while PID has not ended (a zombie has).
process_running() {
    read_process_fields "$1" || return 1
    case "${process_fields[0]}" in Z|X|x) return 1 ;; esac
}

owner_identity() {
    read_process_fields "$1" || return 1
    printf '%s %s\n' "$1" "${process_fields[19]}"
}

owner_alive() { process_running "$1" && [ "${process_fields[19]}" = "$2" ]; }

# A pipe this shell holds both ends of: reading it waits for the whole timeout.
owner_pause_fd=
owner_pause() {
    [ -n "$owner_pause_fd" ] || exec {owner_pause_fd}<> <(:)
    read -r -t 0.5 -u "$owner_pause_fd" _ || true
}
