"""The fleet scenario test: many gateways into PostgreSQL through a real broker, each event stored
exactly once. Run by Scripts/fleet-test (which builds the binaries); see its header for what it
proves. Python 3's standard library only.

The pieces, in the order main() uses them:
  Postgres, Broker       the throw-away PostgreSQL and mosquitto with persistence on a fixed
                         port (Scripts/lib/servers.py: start-postgres, start-broker)
  IngestWorker           one `locus-fleet ingest` process (restartable with the same client id)
  make_variant()         a gateway log of E published records, made once per variant
  Gateway, Fleet.run()   the gateways, run in waves until each one's uplink backlog is drained,
                         with the faults fired at chosen points of the run
  inject()               duplicated, reordered and malformed deliveries from mosquitto_pub
  verify()               what the store holds against every gateway's log
"""

import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import servers

PSQL = servers.PSQL
# The log records the uplink publishes and the ingest stores (`type` in `locus log export`;
# "remote": what a gateway did with the fleet's configurations and commands).
RECORD_KINDS = ("event", "gpio", "visit", "remote")

START = time.monotonic()
# What the run noticed that is no verdict on the store, repeated at the end.
NOTES = []
# Set when the run ends: the background threads start no more processes.
STOPPING = threading.Event()


def say(message):
    """One line of the run's story, with the time since the start."""
    print("[%7.1f s] %s" % (time.monotonic() - START, message), flush=True)


class TestFailure(Exception):
    """The environment or the fleet did something that stops the run (not a verdict on the store)."""


def accepts(port):
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def free_port():
    """A port nothing listens on, below Linux's ephemeral range (32768 on), where the system's own
    outgoing connections would take it between the choice and the bind."""
    for _ in range(50):
        port = random.SystemRandom().randrange(20000, 32768)
        if not accepts(port):
            return port
    raise TestFailure("no free port found on 127.0.0.1")


# MARK: PostgreSQL and mosquitto (Scripts/lib/servers.py: start-postgres and start-broker)


class Postgres(servers.Postgres):
    """The throw-away cluster, queried through the URL the ingest uses."""

    def query(self, sql):
        """Rows of SQL as lists of strings (psql -A -t, fields separated by tabs)."""
        done = subprocess.run([PSQL, "-X", "-q", "-A", "-t", "-F", "\t", "-v", "ON_ERROR_STOP=1", self.url, "-c", sql],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise TestFailure("psql: %s: %s" % (sql, done.stderr.strip()))
        return [line.split("\t") for line in done.stdout.splitlines() if line]

    def try_count(self, sql):
        """One number, or None while the server is away (a restart)."""
        try:
            return int(self.query(sql)[0][0])
        except (TestFailure, IndexError, ValueError):
            return None


class Broker(servers.Broker):
    """mosquitto on 127.0.0.1 at a port kept across restarts, TLS only, a login per gateway and
    the ACL of `locus-fleet broker-acl` (Logins), with persistence, so that sessions and their
    queued messages survive a graceful restart:
      listener PORT 127.0.0.1 with cafile, certfile, keyfile   TLS (certificates made for the run)
      allow_anonymous false, password_file, acl_file           broker-acl's files
      persistence true, persistence_location DIR/   sessions, subscriptions, queued messages
      autosave_interval 0        the database is written when mosquitto exits (SIGTERM): the
                                 test's restart is graceful, and saving a queue of up to a
                                 million messages every second would cost more than the drain
      max_queued_bytes 0         no limit (max_queued_messages 0 is one of the common lines:
                                 the default, 1,000, drops QoS 1 messages past it for a
                                 subscriber that is slower than the gateways, or away)
      max_inflight_messages 2000 QoS 1 messages sent to a client and not yet acknowledged:
                                 twice the ingest's batch, one written while one is read
    """

    def __init__(self, directory, port, logins):
        super().__init__(directory, [
            "persistence true", "persistence_location %s/" % directory, "autosave_interval 0",
            "max_queued_bytes 0", "max_inflight_messages 2000", "log_type notice",
            "listener %d 127.0.0.1" % port, "cafile %s" % logins.ca_file, "certfile %s" % logins.certificate("server.crt"),
            "keyfile %s" % logins.certificate("server.key"), "allow_anonymous false",
            "password_file %s" % logins.password_file, "acl_file %s" % logins.acl_file])
        self.cpu_before_restarts = 0.0
        self.lines_port = port

    def restart(self):
        """SIGTERM (mosquitto writes its database), then the same configuration again."""
        self.cpu_before_restarts += self.cpu_seconds()
        self.stop()
        if STOPPING.is_set():
            raise TestFailure("the run is ending: the broker is not started again")
        self.start()


def start_broker(directory, logins):
    """The broker on a free port; another, when the one chosen was taken before mosquitto bound it."""
    for attempt in range(5):
        broker = Broker(directory, free_port(), logins)
        try:
            broker.start()
            return broker
        except servers.ServerError as error:
            if "Address already in use" not in str(error) or attempt == 4:
                raise
            say("note: the broker's port %d was taken before mosquitto bound it; another" % broker.lines_port)


class Logins:
    """The broker's logins: certificates made for the run (Tests/Fixtures/make-test-certs.sh: a CA
    and the server's certificate for localhost), then `locus-fleet broker-acl` for every gateway,
    the two pseudo-gateways of the injections (gw-reordered, gw-bad) and the fleet's login
    (`fleet`): the ACL, the password file and each login's clear password."""

    FLEET = "fleet"

    def __init__(self, root, fleet_binary, work, gateway_ids):
        self.certificates = os.path.join(work, "certificates")
        done = subprocess.run([os.path.join(root, "Tests/Fixtures/make-test-certs.sh"), self.certificates], capture_output=True, text=True)
        if done.returncode != 0:
            raise TestFailure("make-test-certs.sh: " + (done.stderr.strip() or done.stdout.strip()))
        self.ca_file = self.certificate("ca.crt")
        self.directory = os.path.join(work, "broker-logins")
        listing = os.path.join(work, "gateway-ids")
        with open(listing, "w") as f:
            f.write("".join(i + "\n" for i in gateway_ids))
        done = subprocess.run([fleet_binary, "broker-acl", "--gateways", listing, "--fleet-user", self.FLEET, "--out", self.directory],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise TestFailure("locus-fleet broker-acl: " + done.stderr.strip())
        self.summary = done.stdout.splitlines()[0]
        self.password_file = os.path.join(self.directory, "passwords")
        self.acl_file = os.path.join(self.directory, "acl")

    def certificate(self, name):
        return os.path.join(self.certificates, name)

    def credential(self, login):
        """The file of the login's clear password ([uplink] password_file, --password-file)."""
        return os.path.join(self.directory, "credentials", login + ".password")

    def client_arguments(self, port, login):
        """mosquitto_pub's and mosquitto_sub's options: TLS to localhost (the certificate's name)
        with the run's CA, as `login`."""
        with open(self.credential(login)) as f:
            password = f.read().strip()
        return ["-h", "localhost", "-p", str(port), "--cafile", self.ca_file, "-u", login, "-P", password]


def process_seconds(pid):
    """utime + stime of a live process, in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().splitlines()[-lines:])
    except OSError:
        return ""


# MARK: the ingest


class IngestWorker:
    """`locus-fleet ingest`: its standard error goes to a file (appended across restarts), where
    the line saying `subscribed` is waited for."""

    def __init__(self, fleet, broker_port, logins, database, log, client_id=None, share=None):
        self.command = [fleet, "ingest", "--broker", "mqtts://localhost:%d" % broker_port, "--ca-file", logins.ca_file,
                        "--username", logins.FLEET, "--password-file", logins.credential(logins.FLEET), "--database", database]
        if client_id:
            self.command += ["--client-id", client_id]
        if share:
            self.command += ["--share", share]
        self.name = client_id or "locus-fleet"
        self.log = log
        self.process = None
        self.cpu = 0.0
        self.restarting = False       # killed by the test, to be started again

    # What the worker says once it is ready to take messages.
    READY = "subscribed"

    def subscribed_lines(self):
        try:
            with open(self.log, errors="replace") as f:
                return sum(1 for line in f if self.READY in line)
        except OSError:
            return 0

    def start(self):
        """Starts it and waits for its `subscribed`. The ingest does not wait for a database
        that is away when it starts (it exits 1 at once, like `import`): then it is started
        again a second later, as a service manager would (systemd's Restart=), at most for 30 s,
        and said as a note."""
        deadline = time.monotonic() + 30
        while True:
            if STOPPING.is_set():
                raise TestFailure("the run is ending: %s not started" % self.name)
            before = self.subscribed_lines()
            with open(self.log, "a") as f:
                f.write("--- %s started by the fleet test\n" % self.name)
                f.flush()
                self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=f, stdin=subprocess.DEVNULL)
            while self.subscribed_lines() <= before and self.process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.subscribed_lines() > before:
                return
            if self.process.poll() is None:
                raise TestFailure("ingest %s did not say 'subscribed' within 30 s: %s" % (self.name, tail(self.log)))
            said = tail(self.log, 1)
            if "cannot connect to PostgreSQL" not in said or time.monotonic() > deadline:
                raise TestFailure("ingest %s exited (%d) before subscribing: %s" % (self.name, self.process.returncode, tail(self.log)))
            NOTES.append("ingest %s exited %d at its start (%s) and was started again a second later" % (
                self.name, self.process.returncode, said.split(": ", 2)[-1][:160]))
            say("note: " + NOTES[-1])
            time.sleep(1)

    def alive(self):
        return self.process is not None and self.process.poll() is None

    def kill9(self):
        self.cpu += process_seconds(self.process.pid)
        self.process.kill()
        self.process.wait()

    def stop(self, timeout=60):
        """SIGTERM: it commits what it has and exits 0. Returns its exit status."""
        if self.process is None:
            return None
        self.cpu += process_seconds(self.process.pid)
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return "no exit within %d s of SIGTERM" % timeout
        return self.process.returncode


# MARK: the gateways' logs


def nmea_track(points, first, count, base):
    """RMC and GGA sentences, one fix a second from `base` + `first` seconds: fix s at
    points[s % len(points)] (lat, lon in degrees), so a track continued later keeps its rhythm."""
    def checksummed(body):
        c = 0
        for b in body[1:].encode():
            c ^= b
        return "%s*%02X\r\n" % (body, c)

    def angle(value, degree_digits, hemispheres):
        hemisphere = hemispheres[0] if value >= 0 else hemispheres[1]
        value = abs(value)
        degrees = int(value)
        return "%0*d%010.7f,%s" % (degree_digits, degrees, (value - degrees) * 60, hemisphere)

    out = []
    for s in range(first, first + count):
        moment = base + datetime.timedelta(seconds=s)
        lat, lon = points[s % len(points)]
        hms = moment.strftime("%H%M%S.00")
        position = "%s,%s" % (angle(lat, 2, "NS"), angle(lon, 3, "EW"))
        out.append(checksummed("$GPRMC,%s,A,%s,0.0,0.0,%s,,,A" % (hms, position, moment.strftime("%d%m%y"))))
        out.append(checksummed("$GPGGA,%s,%s,1,09,0.8,20.0,M,-30.0,M,," % (hms, position)))
    return "".join(out)


def north_of(lat, lon, metres):
    return (lat + metres / 111132.0, lon)


# Four kinds of gateway. Each site holds fences that `locus replay` of a synthetic track (a fix a
# second, cycling through `points`) crosses at every fix after the first ones, so the log gets
# exactly E events; "harbour" first runs the demo (the simulated board fed with the harbour
# recording and the crate's beacon), whose log also has GPIO changes (relay1, buzzer) and visits.
VARIANTS = [
    {
        "name": "harbour", "demo": True,
        "conditions": [("yard", "fence", 52.80, 5.25, 100.0)],
        "points": [north_of(52.80, 5.25, 80), north_of(52.80, 5.25, 120)],
        "base": datetime.datetime(2018, 8, 20, 10, 0, 0),
    },
    {
        "name": "yard", "demo": False,
        "conditions": [("yard", "fence", 45.0, 7.0, 100.0)],
        "points": [north_of(45.0, 7.0, 80), north_of(45.0, 7.0, 120)],
        "base": datetime.datetime(2024, 3, 15, 0, 0, 0),
    },
    {
        "name": "quay", "demo": False,
        "conditions": [("quay", "north", 53.5500, 8.5800, 50.0), ("gate", "south", 53.5400, 8.5800, 50.0)],
        "points": [(53.5500, 8.5800), (53.5450, 8.5800), (53.5400, 8.5800), (53.5450, 8.5800)],
        "base": datetime.datetime(2024, 6, 1, 6, 0, 0),
    },
    {
        "name": "depot", "demo": False,
        "conditions": [("depot", "dock1", 37.33467, -122.00898, 60.0), ("depot", "dock2", 37.33667, -122.00898, 60.0)],
        "points": [(37.33467, -122.00898), (37.33567, -122.00898), (37.33667, -122.00898), (37.33567, -122.00898)],
        "base": datetime.datetime(2025, 1, 10, 12, 0, 0),
    },
]


def variant_site(root, variant, directory):
    """The variant's site file (without [uplink]); a board file beside it unless it runs on the
    simulated board."""
    lines = []
    if variant["demo"]:
        with open(os.path.join(root, "Examples/demo/site.toml")) as f:
            demo = f.read()
        for line in demo.splitlines():
            if line.startswith("board = "):
                line = 'board = "%s"' % os.path.join(root, "Boards/sim.toml")
            elif line.startswith("state_dir = "):
                continue
            lines.append(line)
        lines += ["", "[updates]", 'stationary_window = "10s"', 'visit_minimum = "5s"']
    else:
        with open(os.path.join(directory, "board.toml"), "w") as f:
            f.write('[board]\nname = "fleet %s"\n' % variant["name"])
        lines += ['board = "%s"' % os.path.join(directory, "board.toml"), "", "[capacity]", "conditions = 16", "events = 64"]
        # The replays that build the log run the agent, whose site updater reports a stay as a
        # visit (a published record); the counts below are of events, so no stay is long enough.
        lines += ["", "[updates]", 'visit_minimum = "24h"']
    # Small segments: checkpoints fall between the events, as on a gateway that has run a while.
    lines += ["", "[log]", 'segment_size = "64KiB"', 'sync = "interval"', 'fix_interval = "60s"']
    for monitor, identifier, lat, lon, radius in variant["conditions"]:
        lines += ["", "[[monitor.%s.condition]]" % monitor, 'id = "%s"' % identifier,
                  "circle = { lat = %.6f, lon = %.6f, radius = %.1f }" % (lat, lon, radius),
                  "exit_margin = 0.0", 'dwell = "0s"', "accuracy_gate = false"]
    return "\n".join(lines) + "\n"


def published_seqs(locus, state):
    """The seqs of the records the uplink publishes (events, GPIO changes, visits), from
    `locus log export`, in log order."""
    done = subprocess.run([locus, "log", "export", "--state", state, "--format", "jsonl"], capture_output=True, text=True)
    if done.returncode != 0:
        raise TestFailure("locus log export --state %s: %s" % (state, done.stderr.strip()))
    seqs = []
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if record.get("type") in RECORD_KINDS:
            seqs.append(record["seq"])
    return seqs


def run_demo(root, locus, site, state, log):
    """The demo as Scripts/demo runs it: the agent on the simulated board, fed at 200x."""
    with open(log, "a") as f:
        agent = subprocess.Popen([locus, "run", "--config", site, "--state", state], stdout=subprocess.DEVNULL, stderr=f)
    try:
        deadline = time.monotonic() + 20
        while not os.path.exists(os.path.join(state, "control.sock")):
            if agent.poll() is not None or time.monotonic() > deadline:
                raise TestFailure("the demo agent did not start: " + tail(log))
            time.sleep(0.05)
        feed = subprocess.run([locus, "feed", "--nmea", os.path.join(root, "Tests/Corpus/nmea/bundg_zeus_9.log"),
                               "--gnss", os.path.join(state, "sim/gnss"), "--hci", os.path.join(root, "Examples/demo/ble.hci"),
                               "--ble", os.path.join(state, "sim/ble"), "--speed", "200", "--linger", "1", "--wait", "30"],
                              capture_output=True, text=True)
        if feed.returncode != 0:
            raise TestFailure("locus feed: " + feed.stderr.strip())
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait()


def make_variant(root, locus, variant, directory, events):
    """A state directory whose log holds `events` published records (a few more: see the end): the demo's (for
    "harbour"), then events from replays of the variant's track, continued until the count is
    reached."""
    os.makedirs(directory)
    site = os.path.join(directory, "site.toml")
    with open(site, "w") as f:
        f.write(variant_site(root, variant, directory))
    state = os.path.join(directory, "state")
    if variant["demo"]:
        run_demo(root, locus, site, state, os.path.join(directory, "demo.log"))
    have = len(published_seqs(locus, state)) if variant["demo"] else 0
    fix = 0
    for _ in range(20):
        need = events - have
        if need <= 0:
            break
        # The first replay is short: how many events its first fixes log depends on the site (the
        # conditions settle; after the demo the harbour's change too). After it, a replay's first
        # two fixes log none and every later one crosses a fence once.
        count = min(need, 10) if fix == 0 else need + 2
        track = os.path.join(directory, "track-%d.nmea" % fix)
        with open(track, "w") as f:
            f.write(nmea_track(variant["points"], fix, count, variant["base"]))
        fix += count
        done = subprocess.run([locus, "replay", "--config", site, "--nmea", track, "--state", state, "--speed", "max"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise TestFailure("locus replay (%s): %s" % (variant["name"], done.stderr.strip()))
        have = len(published_seqs(locus, state))
    # Each replay's start and stop also log the lines' levels (gpio records, cause restored and
    # safe), so a log may hold a few more than asked; fewer is a failure.
    if have < events:
        raise TestFailure("variant %s: %d published records, fewer than %d" % (variant["name"], have, events))
    return site, state


# MARK: the gateways


def agent_status(state):
    """The running agent's `status` reply over its read.sock (what `locus uplink status` asks),
    or None while it does not answer."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(os.path.join(state, "read.sock"))
            s.sendall(b'{"id":1,"op":"status"}\n')
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        reply = json.loads(data)
        return reply if reply.get("ok") else None
    except (OSError, ValueError):
        return None


def gateway_id(index):
    return "gw-%04d" % index


class Gateway:
    def __init__(self, index, variant, site_text, work, broker_port, logins):
        self.id = gateway_id(index)
        self.variant = variant
        self.directory = os.path.join(work, "gateways", self.id)
        self.state = os.path.join(self.directory, "state")
        self.site = os.path.join(self.directory, "site.toml")
        self.log = os.path.join(self.directory, "agent.log")
        self.site_text = site_text + "\n".join([
            "", "[uplink]", 'broker = "mqtts://localhost:%d"' % broker_port, 'gateway = "%s"' % self.id, "max_inflight = 32",
            'ca_file = "%s"' % logins.ca_file, 'username = "%s"' % self.id, 'password_file = "%s"' % logins.credential(self.id), ""])
        self.process = None
        self.runs = 0
        self.kill_fraction = None     # first run: kill -9 once this share of its backlog is delivered
        self.killing = False
        self.killed = False
        self.initial_backlog = None
        self.progress = 0.0           # share of its backlog delivered (1 when done)
        self.not_before = 0.0
        self.stopping_since = None
        self.done = False
        self.expected = None          # the published seqs of its log, read once it is stopped

    def start(self, variant_state):
        if self.runs == 0:
            os.makedirs(self.directory)
            shutil.copytree(variant_state, self.state, symlinks=True)
            with open(self.site, "w") as f:
                f.write(self.site_text)
        self.runs += 1
        self.initial_backlog = None
        self.killed = False
        with open(self.log, "a") as f:
            self.process = subprocess.Popen([LOCUS, "run", "--config", self.site, "--state", self.state],
                                            stdout=subprocess.DEVNULL, stderr=f, stdin=subprocess.DEVNULL)

    def observe(self, status):
        """Updates the progress from a status reply; True when the backlog is delivered."""
        if status is None or "uplink" not in status:
            return False
        uplink, backlog = status["uplink"], status.get("uplink_backlog") or {}
        records = backlog.get("records", 1)
        if self.initial_backlog is None:
            self.initial_backlog = max(1, records)
        if self.runs == 1:  # a restarted gateway's share stays what its first run reached
            self.progress = max(self.progress, 1.0 - min(1.0, records / self.initial_backlog))
        return uplink.get("state") == "connected" and records == 0 and uplink.get("in_flight", 1) == 0


LOCUS = None  # set by main()


def kill_mid_drain(gateway, faults):
    """Watches one gateway closely and sends SIGKILL once its planned share of the backlog is
    delivered (or when it is about to finish: then the kill comes at the end of the drain)."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and gateway.process.poll() is None:
        status = agent_status(gateway.state)
        if status and "uplink" in status:
            records = (status.get("uplink_backlog") or {}).get("records", 1)
            if gateway.initial_backlog is None:
                gateway.initial_backlog = max(1, records)
            delivered = 1.0 - records / gateway.initial_backlog
            if delivered >= gateway.kill_fraction or records == 0:
                gateway.process.kill()
                gateway.killed = True
                faults["gateway kill -9"] += 1
                say("FAULT kill -9 of %s (pid %d): %d of %d backlog records delivered, cursor %s" % (
                    gateway.id, gateway.process.pid, gateway.initial_backlog - records, gateway.initial_backlog,
                    status["uplink"].get("cursor")))
                break
        time.sleep(0.003)
    gateway.killing = False


# MARK: duplicated, reordered and malformed deliveries


def run_mosquitto_pub(arguments, stdin):
    """mosquitto_pub (arguments: Logins.client_arguments and the message's), again after a failure
    (the broker's restart may fall in the middle: what went through goes twice, which every check
    allows), at most 20 times over 10 s."""
    for attempt in range(20):
        done = subprocess.run(["mosquitto_pub", "-q", "1"] + arguments, input=stdin, capture_output=True)
        if done.returncode == 0:
            return
        time.sleep(0.5)
    raise TestFailure("mosquitto_pub %s: %s" % (" ".join(arguments), done.stderr.decode(errors="replace").strip()))


def mosquitto_pub(client, topic, payloads):
    """Publishes payloads (bytes without newlines) at QoS 1 in order on one connection,
    50,000 a process (mosquitto_pub -l stops early once its packet ids wrap). `client`:
    Logins.client_arguments of the login that publishes."""
    for start in range(0, len(payloads), 50000):
        chunk = payloads[start:start + 50000]
        run_mosquitto_pub(client + ["-i", "fleet-test-pub-%d" % os.getpid(), "-t", topic, "-l"], b"\n".join(chunk) + b"\n")


def mosquitto_pub_one(client, topic, payload):
    """One message whose bytes are exactly `payload` (any bytes: -s reads standard input whole;
    -n sends an empty one, which -s refuses)."""
    run_mosquitto_pub(client + ["-i", "fleet-test-bad-%d" % os.getpid(), "-t", topic, "-s" if payload else "-n"], payload)


def malformed_messages():
    """(topic, payload) pairs that are not records, each to be quarantined once."""
    event = {"gateway": "gw-bad", "monitor": "a", "identifier": "b", "state": "satisfied", "date": "2024-03-14T00:05:30Z",
             "refinement": None, "diagnostics": [], "explain": {}, "prev": 0}

    def with_(base, **changes):
        record = dict(base)
        record.update(changes)
        return json.dumps(record, separators=(",", ":")).encode()

    no_seq = dict(event)
    del no_seq["prev"]
    gpio = {"gateway": "gw-bad", "seq": 7, "output": "relay1", "value": True, "cause": "level", "time": "2024-03-14T00:05:30Z",
            "monitor": "a", "identifier": "b", "prev": 6}
    visit = {"gateway": "gw-bad", "seq": 9, "arrival": "2024-03-14T00:05:30Z", "departure": None, "lat": 45.0, "lon": 7.0,
             "radius": 20.0, "prev": 8}
    return [
        ("locus/gw-bad/event/a/b", b"this is not JSON"),
        ("locus/gw-bad/event/a/b", b'{"gateway":"gw-bad","seq":3,"monitor":"a"'),                 # cut short
        ("locus/gw-bad/event/a/b", json.dumps(no_seq, separators=(",", ":")).encode()),         # no seq
        ("locus/gw-bad/event/a/b", with_(event, seq="twelve")),                                 # seq a string
        ("locus/gw-bad/event/a/b", with_(event, seq=12.5)),                                     # seq not an integer
        ("locus/gw-bad/event/a/b", with_(event, seq=5, state=True)),                            # state a boolean
        ("locus/gw-bad/event/a/b", with_(event, seq=6, monitor="a\u0000b")),                    # U+0000 in a string
        ("locus/gw-bad/event/a/b", b'{"gateway":"gw-bad","seq":6,"monitor":"a\x00b"}'),          # a raw NUL byte
        ("locus/gw-bad/event/a/b", with_(event, seq=18446744073709551616)),                     # a huge seq (2^64)
        ("locus/gw-bad/event/a/b", with_(event, seq=0)),                                        # seq 0
        ("locus/gw-bad/event/a/b", with_(event, seq=-4)),                                       # a negative seq
        ("locus/gw-bad/event/a/b", with_(event, seq=10, prev=10)),                              # prev not below seq
        ("locus/gw-bad/event/a/b", with_(event, seq=11, date="yesterday")),                     # not a time
        ("locus/gw-bad/event/a/b", b'["gateway","gw-bad","seq",13]'),                          # not an object
        ("locus/gw-bad/event/a/b", b'{"gateway":"gw-bad","seq":14,"monitor":"\xff\xfe"}'),        # not UTF-8
        ("locus/gw-bad/event/a/b", b""),                                                       # empty
        ("locus/gw-bad/gpio/relay1", with_(gpio, value="yes")),                                 # value not a boolean
        ("locus/gw-bad/gpio/relay1", with_(gpio, seq=None)),                                    # seq null
        ("locus/gw-bad/visit", with_(visit, lat="north")),                                      # lat a string
        ("locus/gw-bad/visit", with_(visit, arrival=12)),                                       # arrival not a time
    ]


class Capture:
    """mosquitto_sub, with the fleet's login, on the record topics of a few gateways, with a
    persistent session so that it misses nothing across the broker's restart: the payloads
    exactly as the gateways sent them, for the duplicated and reordered deliveries, and the proof
    that a forgery was dropped. Its probes go where the fleet may both write and read."""

    PROBE = "locus/fleet-test/remote/probe"

    def __init__(self, client, gateways, path):
        self.path = path
        self.client = client
        topics = [self.PROBE]
        for gateway in gateways:
            topics += ["locus/%s/event/#" % gateway, "locus/%s/gpio/+" % gateway, "locus/%s/visit" % gateway]
        command = ["mosquitto_sub"] + client + ["-q", "1", "-c", "-i", "fleet-test-capture", "-F", "%t %x"]
        for topic in topics:
            command += ["-t", topic]
        self.file = open(path, "w")
        self.process = subprocess.Popen(command, stdout=self.file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            if self.probe("probe", wait=0.1):
                return
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise TestFailure("the capture subscriber did not subscribe: " + tail(path))

    def probe(self, text, wait):
        """Publishes `text` on the probe topic as the fleet; True once the capture holds it
        (within `wait` seconds): everything published before it has reached the capture too."""
        subprocess.run(["mosquitto_pub"] + self.client + ["-q", "1", "-t", self.PROBE, "-m", text], capture_output=True)
        deadline = time.monotonic() + wait
        while True:
            if self.holds(self.PROBE, text.encode()):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def holds(self, topic, payload):
        """True when the capture received `payload` (bytes) on `topic`."""
        with open(self.path) as f:
            for line in f:
                got, _, hexadecimal = line.rstrip("\n").partition(" ")
                if got == topic and bytes.fromhex(hexadecimal) == payload:
                    return True
        return False

    def messages(self, gateway):
        """(topic, payload bytes, seq) of the gateway's records, each once, in arrival order."""
        seen = set()
        out = []
        prefix = "locus/%s/" % gateway
        with open(self.path) as f:
            for line in f:
                topic, _, hexadecimal = line.rstrip("\n").partition(" ")
                if not topic.startswith(prefix):
                    continue
                payload = bytes.fromhex(hexadecimal)
                if (topic, payload) in seen:
                    continue  # a retained GPIO change again after a new subscription
                seen.add((topic, payload))
                out.append((topic, payload, json.loads(payload)["seq"]))
        return out

    def stop(self):
        self.process.terminate()
        self.process.wait()
        self.file.close()


def inject(logins, port, capture, sources, reorder_source, rng, faults, expected_extra, quarantine_expected, forgeries):
    """Duplicates of real payloads (published again with the source gateway's own login: what a
    redelivery is), a fabricated gateway in reverse order (gw-reordered's login), malformed
    payloads (gw-bad's login), forgeries (one gateway's login under another's prefix). Each
    pseudo-gateway has a login of its own rather than the fleet's: the fleet may write only the
    gateways' remote/ topics, and gives no gateway's records. Runs once the source gateways are
    stopped (their logs exported) and captured in full."""
    def client(login):
        return logins.client_arguments(port, login)

    captured = {}
    for gateway in sources:
        deadline = time.monotonic() + 30
        while True:
            messages = capture.messages(gateway.id)
            if sorted(seq for _, _, seq in messages) == sorted(gateway.expected):
                break
            if time.monotonic() > deadline:
                raise TestFailure("the capture holds %d of %s's %d records after 30 s" % (len(messages), gateway.id, len(gateway.expected)))
            time.sleep(0.2)
        captured[gateway.id] = messages

    # Duplicates: a sample of each source's payloads again, byte for byte, as the gateway sent them.
    for gateway in sources:
        messages = captured[gateway.id]
        sample = sorted(rng.sample(range(len(messages)), min(len(messages), max(10, len(messages) // 20))))
        by_topic = collections.OrderedDict()
        for i in sample:
            by_topic.setdefault(messages[i][0], []).append(messages[i][1])
        for topic, payloads in by_topic.items():
            mosquitto_pub(client(gateway.id), topic, payloads)
        faults["duplicated deliveries"] += len(sample)
        say("FAULT duplicated deliveries: %d of %s's payloads published again (mosquitto_pub -q 1)" % (len(sample), gateway.id))

    # Reordered: another gateway's records copied under the id gw-reordered, newest first.
    messages = captured[reorder_source.id]
    old, new = '"gateway":"%s"' % reorder_source.id, '"gateway":"gw-reordered"'
    copies = []
    for topic, payload, seq in messages:
        text = payload.decode()
        if old not in text:
            raise TestFailure("%s's payload has no %s: %s" % (reorder_source.id, old, text[:200]))
        copies.append(("locus/gw-reordered/" + topic.split("/", 2)[2], text.replace(old, new, 1).encode(), seq))
    copies.sort(key=lambda m: -m[2])
    # One connection a topic (mosquitto_pub -l), the topics by their newest record: within each
    # topic the records come in reverse seq order, and across topics too as far as one topic a
    # connection allows.
    by_topic = collections.OrderedDict()
    for topic, payload, _ in copies:
        by_topic.setdefault(topic, []).append(payload)
    for topic, payloads in by_topic.items():
        mosquitto_pub(client("gw-reordered"), topic, payloads)
    expected_extra["gw-reordered"] = [seq for _, _, seq in copies]
    faults["reordered deliveries"] += len(copies)
    say("FAULT reordered deliveries: %d records of %s published as gw-reordered in reverse seq order" % (len(copies), reorder_source.id))

    # Malformed: each twice (a redelivery), each to be kept once.
    bad = malformed_messages()
    for topic, payload in bad:
        quarantine_expected[(topic, payload)] = 0
    for topic, payload in bad + bad:
        mosquitto_pub_one(client("gw-bad"), topic, payload)
    faults["malformed payloads"] += len(bad)
    say("FAULT malformed payloads: %d distinct ones, each published twice, to locus/gw-bad/..." % len(bad))

    forge(client, capture, sources[0], sources[1], captured[sources[1].id], faults, forgeries)


def forge(client, capture, forger, victim, victim_messages, faults, forgeries):
    """The forger's login publishes two records under the victim's prefix: a copy of the
    victim's newest record with the next seq (a record its log does not have) and one of its
    records with another time (a conflict). The broker must drop both: the capture (the fleet's
    login) must not receive them, and the store must hold exactly the victim's log (verify()).
    A probe published after them reaches the capture behind anything the broker let through."""
    topic, payload, seq = max(victim_messages, key=lambda m: m[2])
    record = json.loads(payload)
    invented = dict(record, seq=seq + 1, prev=seq)
    changed = dict(record)
    for key in ("date", "time", "arrival"):
        if key in changed:
            changed[key] = "2001-01-01T00:00:00.000Z"
            break
    for forged in (invented, changed):
        forged_payload = json.dumps(forged, separators=(",", ":")).encode()
        mosquitto_pub_one(client(forger.id), topic, forged_payload)
        forgeries.append((victim.id, topic, forged_payload, forged["seq"]))
    faults["forged publications"] += 2
    if not capture.probe("after-forgeries", wait=30):
        raise TestFailure("the capture did not receive the probe published after the forgeries")
    say("FAULT forged publications: %s's login published 2 records under %s (seq %d, new; seq %d, another time)" % (
        forger.id, topic, seq + 1, seq))


# MARK: the run


class Fleet:
    def __init__(self, args, work, rng, broker, postgres, workers, variants, logins):
        self.args, self.rng = args, rng
        self.logins = logins
        self.broker, self.postgres, self.workers = broker, postgres, workers
        self.faults = collections.Counter()
        self.problems = []
        self.gateways = []
        for index in range(1, args.gateways + 1):
            variant = variants[(index - 1) % len(variants)]
            self.gateways.append(Gateway(index, variant, variant["site_text"], work, broker.port, logins))
        self.exporter = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.exports = []
        self.background = []
        self.lock = threading.Lock()
        self.hold_starts = False

    def problem(self, text):
        with self.lock:
            self.problems.append(text)
        say("PROBLEM " + text)

    def spawn(self, name, function, *arguments):
        def body():
            try:
                function(*arguments)
            except Exception as error:  # reported, and the run goes on to the verdict
                self.problem("%s: %s" % (name, error))
        thread = threading.Thread(target=body, name=name, daemon=True)
        thread.start()
        self.background.append(thread)

    # The faults of the whole run.

    def kill_ingest(self):
        worker, delay = self.ingest_victim, self.ingest_pause
        worker.restarting = True
        worker.kill9()
        self.faults["ingest kill -9"] += 1
        say("FAULT kill -9 of ingest %s; started again in %.1f s with the same client id" % (worker.name, delay))
        time.sleep(delay)
        try:
            worker.start()
        finally:
            worker.restarting = False
        say("ingest %s subscribed again" % worker.name)

    def watch_workers(self):
        """An ingest worker that ended by itself is a finding; it is started again so that the
        rest of the run still means something."""
        for worker in self.workers:
            if worker.restarting or worker.alive():
                continue
            code = worker.process.returncode
            self.problem("ingest %s ended by itself (exit %s): %s" % (worker.name, code, tail(worker.log, 3)))
            worker.restarting = True
            self.spawn("restart of " + worker.name, self.restart_worker, worker)

    def restart_worker(self, worker):
        try:
            worker.start()
        finally:
            worker.restarting = False

    def restart_broker(self):
        """A graceful restart. No gateway is started from the restart until every running ingest
        worker has subscribed again. With two workers (a share group) the running gateways are
        also paused (SIGSTOP) from just before the restart until then: Debian 12's mosquitto
        (2.0.11) does not recover the $share subscriptions of durable sessions from its database
        (fixed in 2.0.12), so a message to the group sent before a worker has subscribed again
        has no subscriber and is dropped, and a gateway that reconnects first (they do, within a
        second, while the broker saves a large queue) would lose what it sends. With one worker
        (no $share) nothing is paused: its session keeps its subscription across the restart."""
        began = time.monotonic()
        workers = [w for w in self.workers if w.alive() and not w.restarting]
        before = {w: w.subscribed_lines() for w in workers}
        self.hold_starts = True
        paused = []
        if len(self.workers) > 1:
            paused = [g.process for g in self.gateways if g.process and g.process.poll() is None]
            for process in paused:
                process.send_signal(signal.SIGSTOP)
            say("%d running gateways paused for the restart (a share group on mosquitto 2.0.11)" % len(paused))
        try:
            self.broker.restart()
            self.faults["broker restart"] += 1
            say("FAULT broker restarted (SIGTERM, then the same configuration and port): %.2f s" % (time.monotonic() - began))
            deadline = time.monotonic() + 30
            while any(w.alive() and w.subscribed_lines() <= before[w] for w in workers) and time.monotonic() < deadline:
                time.sleep(0.01)
            say("ingest subscribed again %.2f s after the broker stopped" % (time.monotonic() - began))
        finally:
            for process in paused:
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)
            self.hold_starts = False

    def restart_postgres(self):
        if STOPPING.is_set():
            return
        began = time.monotonic()
        self.postgres.restart()
        self.faults["PostgreSQL restart"] += 1
        say("FAULT PostgreSQL restarted (pg_ctl restart -m fast): %.2f s" % (time.monotonic() - began))

    def run(self, capture, sources, reorder_source, expected_extra, quarantine_expected, forgeries):
        rng = self.rng
        # Where in the run each fault comes, as the share of every gateway's backlog delivered.
        planned = sorted([
            (rng.uniform(0.15, 0.35), "ingest kill", self.kill_ingest),
            (rng.uniform(0.40, 0.55), "broker restart", self.restart_broker),
            (rng.uniform(0.60, 0.75), "PostgreSQL restart", self.restart_postgres),
        ], key=lambda p: p[0])
        # Chosen now, in the main thread: the seed alone decides them.
        self.ingest_victim, self.ingest_pause = rng.choice(self.workers), rng.uniform(1.0, 3.0)
        inject_rng = random.Random(rng.randrange(1 << 32))
        for at, name, _ in planned:
            say("plan: %s at %.0f%% of the fleet's backlog delivered" % (name, at * 100))
        killed = rng.sample(self.gateways, min(len(self.gateways), 3 + len(self.gateways) // 100))
        for gateway in killed:
            gateway.kill_fraction = rng.uniform(0.1, 0.8)
        say("plan: kill -9 of %s mid-drain" % ", ".join(sorted(g.id for g in killed)))
        injected = False

        pending = collections.deque(self.gateways)
        again = []                    # killed gateways, each started again from its not_before
        running = []
        parallel = self.args.parallel
        last_report = 0.0
        while pending or again or running:
            now = time.monotonic()
            # Start gateways while there is room, a killed one first once its pause is over.
            while len(running) < parallel and not self.hold_starts:
                ready = [g for g in again if g.not_before <= now]
                if ready:
                    gateway = ready[0]
                    again.remove(gateway)
                elif pending:
                    gateway = pending.popleft()
                else:
                    break
                gateway.start(gateway.variant["state"])
                if gateway.runs > 1:
                    say("%s started again (run %d): it resumes from its log" % (gateway.id, gateway.runs))
                running.append(gateway)
                if gateway.kill_fraction is not None and gateway.runs == 1:
                    gateway.killing = True
                    threading.Thread(target=kill_mid_drain, args=(gateway, self.faults), daemon=True).start()
            # Each running gateway: exited, killed, drained (then SIGTERM), or still sending.
            for gateway in list(running):
                code = gateway.process.poll()
                if code is not None:
                    if gateway.stopping_since is not None:
                        running.remove(gateway)
                        gateway.stopping_since = None
                        if code != 0:
                            self.problem("%s exited with %d after SIGTERM: %s" % (gateway.id, code, tail(gateway.log)))
                        gateway.done = True
                        gateway.progress = 1.0
                        self.exports.append(self.exporter.submit(self.export, gateway))
                    elif gateway.killing:
                        continue
                    else:
                        running.remove(gateway)
                        if not gateway.killed:
                            self.problem("%s exited by itself (%d): %s" % (gateway.id, code, tail(gateway.log)))
                        if gateway.runs >= 5:
                            self.problem("%s gave up after %d runs" % (gateway.id, gateway.runs))
                            gateway.done = True
                            gateway.progress = 1.0
                            self.exports.append(self.exporter.submit(self.export, gateway))
                        else:
                            gateway.not_before = now + rng.uniform(1.0, 3.0)
                            again.append(gateway)
                    continue
                if gateway.killing or gateway.stopping_since is not None:
                    if gateway.stopping_since is not None and now - gateway.stopping_since > 30:
                        self.problem("%s did not stop within 30 s of SIGTERM: kill -9" % gateway.id)
                        gateway.process.kill()
                    continue
                if gateway.observe(agent_status(gateway.state)):
                    gateway.process.send_signal(signal.SIGTERM)
                    gateway.stopping_since = now
            self.watch_workers()
            # The faults of the run, when their share of the backlog is delivered.
            progress = sum(g.progress for g in self.gateways) / len(self.gateways)
            while planned and (progress >= planned[0][0] or not pending and not again and not running):
                _, name, action = planned.pop(0)
                self.spawn(name, action)
            if not injected and all(g.expected is not None for g in sources) and (progress >= 0.3 or not pending and not again):
                injected = True
                self.spawn("injection", inject, self.logins, self.broker.port, capture, sources, reorder_source, inject_rng, self.faults,
                           expected_extra, quarantine_expected, forgeries)
            if now - last_report >= 5:
                last_report = now
                stored = self.postgres.try_count("select count(*) from records")
                say("gateways: %d done, %d running, %d waiting; %.0f%% of the backlog delivered to the broker; %s records stored" % (
                    sum(g.done for g in self.gateways), len(running), len(pending) + len(again), progress * 100,
                    "?" if stored is None else stored))
            time.sleep(0.05)
        for future in self.exports:
            future.result()
        if not injected:  # the sources' logs were read after the last gateway stopped
            self.spawn("injection", inject, self.logins, self.broker.port, capture, sources, reorder_source, inject_rng, self.faults,
                       expected_extra, quarantine_expected, forgeries)
        for thread in self.background:
            thread.join()

    def export(self, gateway):
        gateway.expected = published_seqs(LOCUS, gateway.state)


def wait_for_store(postgres, expected_total, stall_seconds):
    """Until the store holds expected_total records, at most stall_seconds without one more."""
    last, last_change = -1, time.monotonic()
    last_report = 0.0
    while True:
        stored = postgres.try_count("select count(*) from records")
        now = time.monotonic()
        if stored is not None and stored != last:
            last, last_change = stored, now
        if stored is not None and stored >= expected_total:
            say("the store holds %d records (expected %d)" % (stored, expected_total))
            return stored
        if now - last_change > stall_seconds:
            say("the store holds %s of %d records, none more for %d s: giving up waiting" % (last, expected_total, stall_seconds))
            return last
        if now - last_report >= 5:
            last_report = now
            say("waiting for the store: %s of %d records" % ("?" if stored is None else stored, expected_total))
        time.sleep(0.5)


def verify(postgres, fleet_binary, expected, quarantine_expected):
    """Compares the store with the gateways' logs; returns (lines of findings, totals)."""
    findings = []
    stored = collections.defaultdict(list)
    for gateway, seq in postgres.query("select gateway, seq from records"):
        stored[gateway].append(int(seq))
    missing_total = doubled_total = unexpected_total = 0
    for gateway in sorted(set(expected) | set(stored)):
        want = set(expected.get(gateway, []))
        have = stored.get(gateway, [])
        counts = collections.Counter(have)
        doubled = sorted(seq for seq, n in counts.items() if n > 1)
        missing = sorted(want - set(have))
        unexpected = sorted(set(have) - want)
        if gateway not in expected:
            findings.append("UNEXPECTED gateway %s in the store: %d records" % (gateway, len(have)))
        elif missing or doubled or unexpected:
            findings.append("%s: %d expected, %d stored, %d missing %s, %d doubled %s, %d not in its log %s" % (
                gateway, len(want), len(have), len(missing), abbreviate(missing), len(doubled), abbreviate(doubled),
                len(unexpected), abbreviate(unexpected)))
        missing_total += len(missing)
        doubled_total += sum(counts[seq] - 1 for seq in doubled)
        unexpected_total += len(unexpected)
    expected_total = sum(len(seqs) for seqs in expected.values())
    count = int(postgres.query("select count(*) from records")[0][0])
    if count != expected_total:
        findings.append("count(*) of records is %d, the logs published %d" % (count, expected_total))

    status = subprocess.run([fleet_binary, "status", "--database", postgres.url], capture_output=True, text=True)
    if status.returncode != 0:
        gaps = [line for line in status.stdout.splitlines() if line.startswith(("GAP", "CONFLICT"))]
        findings.append("locus-fleet status exited %d: %s" % (status.returncode, " | ".join(gaps[:10]) or status.stderr.strip()))

    # The quarantine: each malformed payload once, nothing else.
    rows = postgres.query("select origin, encode(payload, 'hex'), reason, source from quarantine")
    extra = []
    for origin, payload, reason, source in rows:
        key = (origin, bytes.fromhex(payload))
        if source == "mqtt" and key in quarantine_expected:
            quarantine_expected[key] += 1
        else:
            extra.append("%s %s: %s (%r)" % (source, origin, reason, bytes.fromhex(payload)[:80]))
    for (topic, payload), n in quarantine_expected.items():
        if n != 1:
            findings.append("quarantine: %r on %s kept %d times, not once" % (payload[:80], topic, n))
    for line in extra:
        findings.append("quarantine holds what was not injected: " + line)
    online = postgres.query("select gateway from gateways where online")
    totals = {"expected": expected_total, "stored": count, "missing": missing_total, "doubled": doubled_total,
              "unexpected": unexpected_total, "quarantined": len(rows), "still online": [g for (g,) in online]}
    return findings, totals, status


def verify_forgeries(postgres, capture, expected, forgeries, findings):
    """Each forged publication: not received by the capture (the fleet's login), and nothing of
    it in the store (no row for a seq the victim's log lacks, no conflict for one it has).
    Returns how many were dropped that way."""
    dropped = 0
    for victim, topic, payload, seq in forgeries:
        where = "gateway = '%s' and seq = %d" % (victim, seq)
        stored = seq not in expected[victim] and int(postgres.query("select count(*) from records where " + where)[0][0]) > 0
        conflicted = int(postgres.query("select count(*) from conflicts where " + where)[0][0]) > 0
        if capture.holds(topic, payload) or stored or conflicted:
            findings.append("the forgery under %s (seq %d) got through the broker: %s" % (
                topic, seq, "stored" if stored else "a conflict in the store" if conflicted else "received by the fleet's capture"))
        else:
            dropped += 1
    return dropped


def abbreviate(values, limit=8):
    if not values:
        return ""
    shown = ",".join(str(v) for v in values[:limit])
    return "(%s%s)" % (shown, ",..." if len(values) > limit else "")


def main():
    global LOCUS
    # SIGTERM ends the run as Ctrl-C does: through the clean-up (the servers and agents stop).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(prog="Scripts/fleet-test", description="the fleet scenario test (see Scripts/fleet-test)")
    parser.add_argument("--gateways", type=int, default=50)
    parser.add_argument("--events-per-gateway", type=int, default=1000)
    parser.add_argument("--workers", type=int, choices=[1, 2], default=2)
    parser.add_argument("--parallel", type=int, default=25, help="gateways running at once (default 25)")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--steer", action="store_true", help="the fleet steering its gateways (Scripts/lib/fleet_steer.py)")
    parser.add_argument("--cluster", action="store_true", help="the fleet on the clustered broker (Scripts/lib/fleet_cluster.py)")
    parser.add_argument("--root", required=True)
    parser.add_argument("--locus", required=True)
    parser.add_argument("--fleet", required=True)
    args = parser.parse_args()
    if args.gateways < 4 or args.events_per_gateway < 40:
        parser.error("at least 4 gateways and 40 events a gateway (the harbour variant's demo log alone holds 30)")
    LOCUS = os.path.abspath(args.locus)
    fleet_binary = os.path.abspath(args.fleet)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    rng = random.Random(seed)
    say("fleet test: %d gateways x %d events, %d ingest worker%s, %d gateways at once, seed %d (--seed %d repeats the choices)" % (
        args.gateways, args.events_per_gateway, args.workers, "s" if args.workers > 1 else "", min(args.parallel, args.gateways), seed, seed))

    if args.steer:
        import fleet_steer
        return fleet_steer.main(args, seed, rng, fleet_binary)
    if args.cluster:
        import fleet_cluster
        return fleet_cluster.main(args, seed, rng, fleet_binary)

    work = tempfile.mkdtemp(prefix="locus-fleet.")
    os.chmod(work, 0o755)
    postgres = Postgres(os.path.join(work, "postgres"))
    broker = None
    workers = []
    capture = None
    fleet = None
    failed = True
    try:
        postgres.start()
        say("PostgreSQL on 127.0.0.1:%d (%s)" % (postgres.port, os.path.join(work, "postgres")))
        migrate = subprocess.run([fleet_binary, "migrate", "--database", postgres.url], capture_output=True, text=True)
        if migrate.returncode != 0:
            raise TestFailure("locus-fleet migrate: " + migrate.stderr.strip())
        logins = Logins(args.root, fleet_binary, work, [gateway_id(i) for i in range(1, args.gateways + 1)] + ["gw-reordered", "gw-bad"])
        say("logins: " + logins.summary)
        broker = start_broker(os.path.join(work, "broker"), logins)
        say("mosquitto on 127.0.0.1:%d, TLS, allow_anonymous false, broker-acl's logins and ACL, with persistence (%s)" % (
            broker.port, broker.directory))

        # The ingest subscribes before anything is published: its persistent session is what
        # makes the broker keep messages for it.
        if args.workers == 1:
            workers = [IngestWorker(fleet_binary, broker.port, logins, postgres.url, os.path.join(work, "ingest.log"))]
        else:
            workers = [IngestWorker(fleet_binary, broker.port, logins, postgres.url, os.path.join(work, "ingest-%d.log" % n),
                                    client_id="fleet-%d" % n, share="fleet") for n in (1, 2)]
        for worker in workers:
            worker.start()
        say("ingest: %s subscribed" % ", ".join(w.name for w in workers))

        began = time.monotonic()
        variants = []
        for variant in VARIANTS:
            variant = dict(variant)
            directory = os.path.join(work, "variants", variant["name"])
            site, variant["state"] = make_variant(args.root, LOCUS, variant, directory, args.events_per_gateway)
            with open(site) as f:
                variant["site_text"] = f.read()
            variants.append(variant)
        say("gateway logs: %d variants of %d published records each (%s), %.1f s" % (
            len(variants), args.events_per_gateway, ", ".join(v["name"] for v in variants), time.monotonic() - began))

        fleet = Fleet(args, work, rng, broker, postgres, workers, variants, logins)
        fleet.watch_workers()
        first_wave = fleet.gateways[:min(args.parallel, len(fleet.gateways))]
        sources = rng.sample(first_wave, min(3, len(first_wave)))
        # The harbour variant has GPIO changes and visits: copied in reverse, every kind comes out of order.
        reorder_source = next((g for g in sources if g.variant["demo"]), sources[0])
        capture = Capture(logins.client_arguments(broker.port, Logins.FLEET), [g.id for g in sources], os.path.join(work, "capture.txt"))
        say("capturing the payloads of %s for duplicates; %s's copied as gw-reordered" % (
            ", ".join(g.id for g in sources), reorder_source.id))

        expected_extra = {}
        quarantine_expected = {}
        forgeries = []
        run_began = time.monotonic()
        broker_cpu_before = broker.cpu_seconds()
        fleet.run(capture, sources, reorder_source, expected_extra, quarantine_expected, forgeries)
        drained = time.monotonic() - run_began
        say("every gateway drained and stopped: %.1f s" % drained)

        expected = {g.id: g.expected for g in fleet.gateways}
        expected.update(expected_extra)
        expected_total = sum(len(s) for s in expected.values())
        for gateway in fleet.gateways:
            if len(gateway.expected) != args.events_per_gateway:
                say("note: %s's log holds %d published records (%d made)" % (gateway.id, len(gateway.expected), args.events_per_gateway))
        stored = wait_for_store(postgres, expected_total, stall_seconds=60)
        all_stored = time.monotonic() - run_began

        for worker in workers:
            if not worker.alive():
                fleet.problem("ingest %s is not running at the end (exit %s): %s" % (worker.name, worker.process.returncode, tail(worker.log)))
        # A moment for the last status messages (offline) before the workers stop.
        time.sleep(1)
        for worker in workers:
            code = worker.stop()
            if code != 0:
                fleet.problem("ingest %s exited %s after SIGTERM (0 expected): %s" % (worker.name, code, tail(worker.log)))

        findings, totals, status = verify(postgres, fleet_binary, expected, quarantine_expected)
        dropped = verify_forgeries(postgres, capture, expected, forgeries, findings)
        rate = postgres.query("select count(*), extract(epoch from max(received_at) - min(received_at)) from records")[0]
        span = float(rate[1] or 0)
        ingest_rate = int(rate[0]) / span if span > 0 else 0

        print()
        print("| gateways | events | stored | missing | doubled | quarantined | forgeries dropped | faults injected | wall time | ingest rate |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        print("| %d (+ gw-reordered) | %d | %d | %d | %d | %d of %d | %d of %d | %s | %.1f s (drain %.1f s, all stored %.1f s) | %.0f records/s |" % (
            len(fleet.gateways), totals["expected"], totals["stored"], totals["missing"], totals["doubled"],
            totals["quarantined"], len(quarantine_expected), dropped, len(forgeries),
            ", ".join("%d %s" % (n, name) for name, n in sorted(fleet.faults.items())),
            time.monotonic() - START, drained, all_stored, ingest_rate))
        print()
        cpu = ", ".join("%s %.2f s" % (w.name, w.cpu) for w in workers)
        say("CPU time: broker %.2f s, ingest %s" % (broker.cpu_before_restarts + broker.cpu_seconds() - broker_cpu_before, cpu))
        if totals["still online"]:
            findings.append("%d gateways are online in the gateways table after every one has stopped: %s" % (
                len(totals["still online"]), abbreviate(sorted(totals["still online"]))))
        for note in NOTES:
            print("note: " + note)
        problems = fleet.problems + findings
        expected_faults = {"gateway kill -9", "ingest kill -9", "broker restart", "PostgreSQL restart", "duplicated deliveries",
                           "reordered deliveries", "malformed payloads", "forged publications"}
        for name in sorted(expected_faults - set(fleet.faults)):
            problems.append("the fault '%s' was not injected" % name)
        for line in problems:
            print("FAIL " + line)
        if problems:
            print("fleet test: FAILED (%d findings); seed %d; work directory kept: %s" % (len(problems), seed, work))
            return 1
        print("fleet test: passed: %d records from %d gateways stored exactly once, %d malformed payloads quarantined once each" % (
            totals["stored"], len(expected), len(quarantine_expected)))
        failed = False
        return 0
    except (TestFailure, servers.ServerError) as error:
        print("fleet test: %s; seed %d; work directory kept: %s" % (error, seed, work))
        return 1
    except (KeyboardInterrupt, SystemExit):
        print("fleet test: interrupted; stopping what it started", flush=True)
        failed = False  # nothing to look at: the work directory goes unless --keep
        raise
    finally:
        STOPPING.set()
        # A second signal during the clean-up would leave servers behind: ignored from here.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if capture:
            capture.stop()
        for worker in workers:
            if worker.alive():
                worker.process.kill()
                worker.process.wait()
        for gateway in (fleet.gateways if fleet else []):
            if gateway.process and gateway.process.poll() is None:
                gateway.process.kill()
                gateway.process.wait()
        if broker:
            try:
                broker.stop()
            except servers.ServerError:
                pass
        postgres.stop()
        if not args.keep and not failed:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print("work directory: %s" % work)


if __name__ == "__main__":
    sys.exit(main())
