"""mosquitto and PostgreSQL for the Python scripts (Scripts/lib/fleet_test.py, Scripts/bench-fleet),
started the one way this repository starts them: Scripts/lib/start-broker and
Scripts/lib/start-postgres (Scripts/lib/broker.sh and postgres.sh say what they configure). Each
helper stays beside its server and stops it when this process is gone, however it ends.
Python 3's standard library only.
"""

import os
import signal
import subprocess
import time

LIBRARY = os.path.dirname(os.path.abspath(__file__))
PSQL = "/usr/lib/postgresql/15/bin/psql"


class ServerError(Exception):
    """A server did not start or stop."""


def _tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().splitlines()[-lines:])
    except OSError:
        return ""


def _start_helper(command, directory, ready_name, what, timeout):
    """Runs a start-* helper and waits (at most `timeout` seconds) for its ready file: the helper
    and the file's fields."""
    ready = os.path.join(directory, ready_name)
    errors = os.path.join(directory, "helper.err")
    try:
        os.remove(ready)
    except FileNotFoundError:
        pass
    with open(errors, "a") as f:
        helper = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=f)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(ready) as f:
                text = f.read()
            if text.endswith("\n"):
                return helper, text.split()
        except FileNotFoundError:
            pass
        if helper.poll() is not None:
            raise ServerError("%s did not start (exit %d): %s" % (what, helper.returncode, _tail(errors)))
        if time.monotonic() > deadline:
            helper.terminate()
            helper.wait()
            raise ServerError("%s did not start within %d s: %s" % (what, timeout, _tail(errors)))
        time.sleep(0.02)


class Broker:
    """Debian's mosquitto under Scripts/lib/start-broker. `lines`: configuration lines after the
    common ones (persistence, listeners; none: a listener on a free port). A restart (start()
    after stop()) keeps the configuration and the ports."""

    def __init__(self, directory, lines=()):
        self.directory = directory
        self.lines = list(lines)
        self.helper = None
        self.pid = None
        self.ports = []
        self.port = None
        os.makedirs(directory, exist_ok=True)

    def start(self):
        command = [os.path.join(LIBRARY, "start-broker"), self.directory] + self.lines
        self.lines = []
        self.helper, fields = _start_helper(command, self.directory, "broker.ready", "mosquitto", 20)
        self.pid = int(fields[0])
        self.ports = [int(port) for port in fields[1:]]
        self.port = self.ports[0]

    def running(self):
        return self.helper is not None and self.helper.poll() is None

    def stop(self, signal_number=signal.SIGTERM, timeout=60):
        """SIGTERM (the broker saves its persistence) or SIGKILL (a crash), then waits for it."""
        if self.helper is None:
            return
        try:
            os.kill(self.pid, signal_number)
        except ProcessLookupError:
            pass
        try:
            self.helper.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.pid, signal.SIGKILL)
            self.helper.wait()
            raise ServerError("mosquitto did not stop within %d s of signal %d" % (timeout, signal_number))
        finally:
            self.helper = None

    def cpu_seconds(self):
        """utime + stime of the running broker, in seconds."""
        if not self.running():
            return 0.0
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return 0.0

    def log(self):
        return _tail(os.path.join(self.directory, "broker.log"))


class Postgres:
    """A throw-away cluster under Scripts/lib/start-postgres (Debian's PostgreSQL 15 on 127.0.0.1,
    the role and database `fleet`: `url`). Restarts and stops go through postgres.sh's functions."""

    def __init__(self, directory, standby_of=None):
        self.directory = os.path.abspath(directory)
        self.standby_of = standby_of
        self.helper = None
        self.port = None
        self.url = None
        os.makedirs(self.directory, exist_ok=True)

    def start(self):
        """Starts the cluster; with `standby_of` (a running Postgres), a synchronous standby of it."""
        standby = ["--standby-of", self.standby_of.directory] if self.standby_of else []
        command = [os.path.join(LIBRARY, "start-postgres")] + standby + [self.directory]
        self.helper, fields = _start_helper(command, self.directory, "postgres.ready", "PostgreSQL", 120)
        self.port, self.url = int(fields[0]), fields[1]

    def _bash(self, body, *arguments):
        script = '. "$1/postgres.sh"; postgres_dir="$2"; postgres_port="$3"; shift 3; ' + body
        return subprocess.run(["bash", "-c", script, "postgres", LIBRARY, self.directory, str(self.port or "")] + list(arguments),
                              capture_output=True, text=True)

    def session(self, database):
        """One psql kept open on `database` (stdin in, a line out per query): for polling
        without starting a process and a connection each time."""
        return subprocess.Popen(["bash", "-c", '. "$1/postgres.sh"; exec "$postgres_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 '
                                 '-h "$2" -p "$3" -U fleet_admin -d "$4"', "postgres", LIBRARY, self.directory, str(self.port), database],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def restart(self):
        """pg_ctl restart -m fast: every connection ends; the same port."""
        done = self._bash("postgres_restart")
        if done.returncode != 0:
            raise ServerError("postgres_restart failed: " + done.stderr.strip())

    def crash(self):
        """pg_ctl stop -m immediate: as a crash (the helper stays until stop())."""
        self._bash("postgres_stop immediate")

    def promote(self):
        """A standby becomes a primary that takes writes."""
        done = self._bash("postgres_promote")
        if done.returncode != 0:
            raise ServerError("postgres_promote failed: " + done.stderr.strip())

    def stop(self):
        """Stops the cluster and its helper (the directory stays)."""
        if self.helper is None:
            return
        self._bash("postgres_stop")
        self.helper.terminate()
        self.helper.wait()
        self.helper = None

    def psql(self, sql, database="postgres"):
        """SQL as the superuser through the socket; psql's unaligned, tuples-only output."""
        done = self._bash('"$postgres_bin/psql" -X -q -A -t -v ON_ERROR_STOP=1 -h "$postgres_dir" -p "$postgres_port" '
                          '-U fleet_admin -d "$1" -c "$2"', database, sql)
        if done.returncode != 0:
            raise ServerError("psql: %s: %s" % (sql, done.stderr.strip()))
        return done.stdout.strip()
