"""`Scripts/fleet-test --steer`: the fleet steering its gateways (docs/remote.md) through the same
real parts as the fleet test (mosquitto over TLS with a login per gateway and broker-acl's ACL,
PostgreSQL, `locus-fleet ingest`), each gateway a real `locus run` with `[remote]`.

The run, with N gateways (50 in CI, 1000 for the full run), a twentieth of them offline until the
end (the versions are the store's: 1 to 4 in a fresh database):
  1  to the group `half` (every other gateway): a condition added beside the unchanged one;
  2  to all: another condition added, while some gateways are killed (kill -9) right after the
     publication, mid-apply, and started again, and the broker restarts once (gracefully);
  3  to the group `canary`: a key no site file has, refused by each with its reason; then a
     rollback to 2's fragment as 4, which they apply;
  forgeries: a version signed by another key, a genuine older version replayed, and a gateway's
      genuine message published on another's topic, each refused; then `config publish`
      puts every gateway's desired version back as the retained message;
  commands: a pulse of `buzzer` for every online gateway (N of them; one gateway's message
      published a second time, byte for byte), each run exactly once;
  the offline gateways start, apply the newest version (only it), and everything stops.

Then: every gateway's applied version equals its desired one (`config status`); each log's
configuration records are in version order; the unchanged condition was never removed or added
again and its output never moved; every refusal is logged with its reason and changed nothing;
every command ran once (one record, one pulse) and its result is stored; the store holds every
published record of every gateway once. It prints the time from `config set` to every online
gateway applied, and the commands' round trip (send to stored result, p50 and p99).
"""

import base64
import collections
import json
import os
import re
import random
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import fleet_test as ft

SITE = """board = "%(board)s"

[[monitor.road.condition]]
id = "fence"
circle = { lat = 45.001, lon = 7.0, radius = 40.0 }
assuming = "satisfied"

[[action]]
when = "road/fence"
state = "satisfied"
gpio = "relay1"
mode = "level"
"""

UNCHANGED = """[[monitor.road.condition]]
id = "fence"
circle = { lat = 45.001, lon = 7.0, radius = 40.0 }
assuming = "satisfied"
"""

# The fragments, by what they do: the versions are the fleet's, numbered by the store in order
# (added: 1, more: 2, typo: 3, the rollback: 4).
FRAGMENTS = {
    "added": UNCHANGED + '\n[[monitor.yard.condition]]\nid = "gate"\ncircle = { lat = 45.01, lon = 7.0, radius = 30.0 }\n',
    "more": UNCHANGED + '\n[[monitor.yard.condition]]\nid = "gate"\ncircle = { lat = 45.01, lon = 7.0, radius = 30.0 }\n'
       + '\n[[monitor.dock.condition]]\nid = "bay"\ncircle = { lat = 45.02, lon = 7.0, radius = 30.0 }\n',
    "typo": UNCHANGED + '\n[monitr.typo]\n',
}


class Steer:
    def __init__(self, args, work, rng, fleet_binary, broker, postgres, logins):
        self.args, self.work, self.rng, self.fleet = args, work, rng, fleet_binary
        self.broker, self.postgres, self.logins = broker, postgres, logins
        self.ids = [ft.gateway_id(i) for i in range(1, args.gateways + 1)]
        self.offline = set(self.ids[-max(2, args.gateways // 20):])
        self.half = self.ids[::2]
        self.canary = self.ids[1:1 + max(2, args.gateways // 10)]
        self.key = os.path.join(work, "fleet.key")
        self.processes = {}
        self.figures = {}
        self.findings = []
        self.faults = {}

    # MARK: tools

    def run_fleet(self, arguments, check=True):
        done = subprocess.run([self.fleet] + arguments + (["--database", self.postgres.url] if arguments[0] in ("config", "group", "command") and arguments[1] not in ("keygen",) else []),
                              capture_output=True, text=True)
        if check and done.returncode != 0:
            raise ft.TestFailure("locus-fleet %s: %s" % (" ".join(arguments[:3]), (done.stderr or done.stdout).strip()))
        return done

    def broker_options(self):
        return ["--broker", "mqtts://localhost:%d" % self.broker.port, "--ca-file", self.logins.ca_file,
                "--username", self.logins.FLEET, "--password-file", self.logins.credential(self.logins.FLEET)]

    def set_config(self, name, target):
        """`config set` of FRAGMENTS[name]: (the version the store gave it, when it was set)."""
        path = os.path.join(self.work, "fragment-%s.toml" % name)
        with open(path, "w") as f:
            f.write(FRAGMENTS[name])
        began = time.monotonic()
        done = self.run_fleet(["config", "set"] + target + ["--key", self.key] + self.broker_options() + [path])
        return self.version(done.stdout), began

    @staticmethod
    def version(output):
        """The version `config set` or `rollback` says it stored ("version 3 for ...")."""
        match = re.search(r"^version (\d+)", output, re.M)
        if not match:
            raise ft.TestFailure("locus-fleet did not say which version it stored: " + output.strip())
        return int(match.group(1))

    def status(self):
        done = self.run_fleet(["config", "status", "--json"], check=False)
        try:
            return {g["gateway"]: g for g in json.loads(done.stdout)["gateways"]}
        except (ValueError, KeyError):
            raise ft.TestFailure("config status --json: " + (done.stderr or done.stdout).strip())

    def wait_applied(self, gateways, version, what, timeout=300):
        """Until every one of `gateways` has `version` applied (or refused it, when `refused`);
        returns the seconds it took."""
        began = time.monotonic()
        while True:
            status = self.status()
            late = [g for g in gateways if (status.get(g) or {}).get("applied") != version]
            if not late:
                return time.monotonic() - began
            if time.monotonic() - began > timeout:
                raise ft.TestFailure("%s: %d gateways have not applied version %d after %d s: %s" % (
                    what, len(late), version, timeout, ft.abbreviate(late)))
            time.sleep(0.25)

    # MARK: gateways

    def start(self, gateway):
        directory = os.path.join(self.work, "gateways", gateway)
        state = os.path.join(directory, "state")
        if gateway not in self.processes:
            os.makedirs(state, exist_ok=True)
            with open(os.path.join(directory, "site.toml"), "w") as f:
                f.write(SITE % {"board": os.path.join(self.args.root, "Boards/sim.toml")} + "\n".join([
                    "", "[uplink]", 'broker = "mqtts://localhost:%d"' % self.broker.port, 'gateway = "%s"' % gateway,
                    'ca_file = "%s"' % self.logins.ca_file, 'username = "%s"' % gateway,
                    'password_file = "%s"' % self.logins.credential(gateway),
                    "", "[remote]", 'key = "%s"' % (self.key[:-4] + ".pub"), 'settable = ["monitor", "action"]', 'commands = ["pulse"]', ""]))
        with open(os.path.join(directory, "agent.log"), "a") as log:
            self.processes[gateway] = subprocess.Popen([ft.LOCUS, "run", "--config", os.path.join(directory, "site.toml"), "--state", state],
                                                       stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL)

    def state(self, gateway):
        return os.path.join(self.work, "gateways", gateway, "state")

    def wait_connected(self, gateways, timeout=None):
        timeout = timeout or 120 + len(gateways) // 5
        began = time.monotonic()
        waiting = list(gateways)
        while waiting:
            waiting = [g for g in waiting if ((ft.agent_status(self.state(g)) or {}).get("uplink") or {}).get("state") != "connected"]
            if waiting and time.monotonic() - began > timeout:
                raise ft.TestFailure("%d gateways not connected after %d s: %s" % (len(waiting), timeout, ft.abbreviate(waiting)))
            time.sleep(0.2)

    def kill_mid_apply(self, victims):
        """kill -9 of each victim 0-300 ms after the publication, then started again."""
        def kill(gateway):
            time.sleep(self.rng.uniform(0, 0.3))
            self.processes[gateway].kill()
            self.processes[gateway].wait()
            time.sleep(0.5)
            self.start(gateway)
        threads = [threading.Thread(target=kill, args=(g,)) for g in victims]
        for thread in threads:
            thread.start()
        return threads

    # MARK: the run

    def run(self):
        self.run_fleet(["config", "keygen", "--out", self.key])
        other = os.path.join(self.work, "other.key")
        self.run_fleet(["config", "keygen", "--out", other])
        self.run_fleet(["group", "set", "fleet"] + self.ids)
        self.run_fleet(["group", "set", "half"] + self.half)
        self.run_fleet(["group", "set", "canary"] + self.canary)
        online = [g for g in self.ids if g not in self.offline]
        for gateway in online:
            self.start(gateway)
        self.wait_connected(online)
        ft.say("steer: %d gateways online, %d offline until the end; groups half (%d), canary (%d)" % (
            len(online), len(self.offline), len(self.half), len(self.canary)))

        added, _ = self.set_config("added", ["--group", "half"])
        self.figures["half"] = self.wait_applied([g for g in self.half if g not in self.offline], added, "version %d to half" % added)
        replay = self.capture_retained(self.half[0])
        ft.say("steer: version %d applied by the online half %.1f s after config set" % (added, self.figures["half"]))

        victims = self.rng.sample([g for g in online if g not in self.canary], max(2, self.args.gateways // 50))
        more, began = self.set_config("more", ["--group", "fleet"])
        threads = self.kill_mid_apply(victims)
        self.faults["gateways killed mid-apply"] = len(victims)
        restart_at = began + self.rng.uniform(0.2, 1.0)
        time.sleep(max(0, restart_at - time.monotonic()))
        self.broker.restart()
        self.faults["broker restarts"] = 1
        for thread in threads:
            thread.join()
        self.wait_applied(online, more, "version %d to all" % more)
        self.figures["all"] = time.monotonic() - began
        ft.say("steer: version %d applied by all %d online gateways %.1f s after config set (%d killed mid-apply, the broker restarted)" % (
            more, len(online), self.figures["all"], len(victims)))

        typo, _ = self.set_config("typo", ["--group", "canary"])
        self.wait_refused(self.canary, typo)
        rollback = self.version(self.run_fleet(["config", "rollback", "--to", str(more), "--group", "canary", "--key", self.key]
                                               + self.broker_options()).stdout)
        self.wait_applied([g for g in self.canary if g not in self.offline], rollback, "the rollback to version %d's fragment" % more)
        ft.say("steer: version %d (an unknown key) refused by the canary's %d gateways, rolled back as version %d" % (
            typo, len(self.canary), rollback))

        self.forge(online, replay, other)
        self.commands(online)

        for gateway in sorted(self.offline):
            self.start(gateway)
        self.wait_connected(sorted(self.offline))
        began = time.monotonic()
        while True:
            status = self.status()
            late = [g for g in self.ids if (status.get(g) or {}).get("applied") != (status.get(g) or {}).get("desired")]
            if not late:
                break
            if time.monotonic() - began > 300:
                raise ft.TestFailure("%d gateways not on their desired version after 300 s: %s" % (len(late), ft.abbreviate(late)))
            time.sleep(0.25)
        ft.say("steer: the %d offline gateways came back and applied their desired version in %.1f s" % (len(self.offline), time.monotonic() - began))
        # What the uplinks published, once drained: the lines' safe levels a stop logs go out at
        # the gateway's next start, not in this run.
        self.wait_drained(self.ids)
        self.expected = {g: ft.published_seqs(ft.LOCUS, self.state(g)) for g in self.ids}
        for gateway in self.ids:
            self.processes[gateway].send_signal(signal.SIGTERM)
        for gateway in self.ids:
            if self.processes[gateway].wait(60) != 0:
                self.findings.append("%s exited %s after SIGTERM" % (gateway, self.processes[gateway].returncode))

    def wait_refused(self, gateways, version, timeout=120):
        began = time.monotonic()
        while True:
            status = self.status()
            late = [g for g in gateways if g not in self.offline and not (status.get(g) or {}).get("refused")]
            if not late:
                for gateway in gateways:
                    reason = (status.get(gateway) or {}).get("refused_reason") or ""
                    if gateway not in self.offline and "unknown key 'monitr'" not in reason:
                        self.findings.append("%s refused version %d for another reason: %s" % (gateway, version, reason))
                return
            if time.monotonic() - began > timeout:
                raise ft.TestFailure("version %d: no refusal from %s after %d s" % (version, ft.abbreviate(late), timeout))
            time.sleep(0.25)

    def wait_drained(self, gateways, timeout=None):
        timeout = timeout or 120 + len(gateways) // 5
        began = time.monotonic()
        for gateway in gateways:
            while True:
                status = ft.agent_status(self.state(gateway)) or {}
                backlog = (status.get("uplink_backlog") or {}).get("records", 1)
                if backlog == 0 and (status.get("uplink") or {}).get("in_flight", 1) == 0:
                    break
                if time.monotonic() - began > timeout:
                    raise ft.TestFailure("%s's uplink did not drain within %d s" % (gateway, timeout))
                time.sleep(0.1)

    def capture_retained(self, gateway):
        """The retained configuration on `gateway`'s topic, byte for byte (for the replay)."""
        done = subprocess.run(["mosquitto_sub"] + self.logins.client_arguments(self.broker.port, self.logins.FLEET)
                              + ["-t", "locus/%s/remote/config" % gateway, "-C", "1", "-N", "-W", "10"], capture_output=True)
        if done.returncode != 0 or not done.stdout:
            raise ft.TestFailure("no retained configuration for %s: %s" % (gateway, done.stderr.decode(errors="replace").strip()))
        return done.stdout

    def forge(self, online, replay, other_key):
        """Three messages each refused by the gateway they reach, then the desired versions put back."""
        targets = [g for g in online if g not in self.canary][:3]
        path = os.path.join(self.work, "forged-fragment.toml")
        # Another key: a real message built by locus-fleet, signed with a key the gateways do not hold.
        own = self.capture_retained(targets[1])
        body = re.sub(r"(?m)^version = \d+$", "version = 99", own.decode().rsplit("# locus-signature: ", 1)[0])
        signed = subprocess.run(["openssl", "dgst", "-sha256", "-sign", other_key], input=body.encode(), capture_output=True)
        forged = body + "# locus-signature: ecdsa-p256-sha256 " + base64.b64encode(signed.stdout).decode() + "\n"
        cases = [(targets[0], replay, "older than the applied version"),
                 (targets[1], forged.encode(), "does not verify"),
                 (targets[2], own, "for gateway '%s'" % targets[1])]
        client = self.logins.client_arguments(self.broker.port, self.logins.FLEET)
        for gateway, payload, _ in cases:
            done = subprocess.run(["mosquitto_pub"] + client + ["-q", "1", "-r", "-t", "locus/%s/remote/config" % gateway, "-s"], input=payload,
                                  capture_output=True)
            if done.returncode != 0:
                raise ft.TestFailure("mosquitto_pub of a forgery: " + done.stderr.decode(errors="replace"))
        self.faults["forged configurations"] = len(cases)
        self.forgeries = cases
        deadline = time.monotonic() + 60
        for gateway, _, reason in cases:
            while not any(reason in (r.get("reason") or "") for r in self.remote_records(gateway) if r.get("result") == "refused"):
                if time.monotonic() > deadline:
                    self.findings.append("%s did not refuse a forgery (%s)" % (gateway, reason))
                    break
                time.sleep(0.2)
        self.run_fleet(["config", "publish", "--key", self.key] + self.broker_options())
        ft.say("steer: a replayed older version, another key's signature and another gateway's message refused; desired versions published again")

    def commands(self, online):
        """As many pulses as the fleet has gateways, sent by `command send` 8 at a time: one for
        every online gateway, then one more for the first few (a round later, when the first
        pulse has ended); one gateway's message delivered again, byte for byte."""
        client = self.logins.client_arguments(self.broker.port, self.logins.FLEET)
        duplicate = online[0]
        sub = subprocess.Popen(["mosquitto_sub"] + client + ["-t", "locus/%s/remote/command" % duplicate, "-C", "1", "-N", "-W", str(60 + len(online) // 5)],
                               stdout=subprocess.PIPE)
        time.sleep(0.5)
        self.sent = collections.Counter()
        rounds = [list(online), list(online[:self.args.gateways - len(online)])]
        began = time.monotonic()
        for pending in rounds:
            self.send_round(pending)
            self.sent.update(pending)
            self.wait_answered(sum(self.sent.values()))
        self.figures["commands"] = time.monotonic() - began
        payload, _ = sub.communicate(timeout=60)
        done = subprocess.run(["mosquitto_pub"] + client + ["-q", "1", "-t", "locus/%s/remote/command" % duplicate, "-s"], input=payload,
                              capture_output=True)
        self.faults["commands delivered twice"] = 1 if done.returncode == 0 and payload else 0
        if not self.faults["commands delivered twice"]:
            self.findings.append("the command meant to be delivered twice was not captured: %s" % done.stderr.decode(errors="replace").strip())
        rows = self.postgres.query(
            "select extract(epoch from r.received_at - c.created_at) from commands c join records r "
            "on r.kind = 'command' and r.payload->>'id' = c.id order by 1")
        trips = sorted(float(row[0]) for row in rows)
        self.figures["round trip"] = (trips[len(trips) // 2], trips[min(len(trips) - 1, int(len(trips) * 0.99))]) if trips else (0, 0)
        ft.say("steer: %d pulses sent and answered in %.1f s; round trip p50 %.0f ms, p99 %.0f ms" % (
            sum(self.sent.values()), self.figures["commands"], self.figures["round trip"][0] * 1000, self.figures["round trip"][1] * 1000))

    def send_round(self, gateways):
        pending = list(gateways)
        lock = threading.Lock()
        errors = []

        def sender():
            while True:
                with lock:
                    if not pending:
                        return
                    gateway = pending.pop(0)
                done = self.run_fleet(["command", "send", "--gateway", gateway, "--expires", "10min", "--key", self.key]
                                      + self.broker_options() + ["pulse", "buzzer", "200ms"], check=False)
                if done.returncode != 0:
                    with lock:
                        errors.append("%s: %s" % (gateway, done.stderr.strip()))
        threads = [threading.Thread(target=sender) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise ft.TestFailure("command send: %s" % ft.abbreviate(errors))

    def wait_answered(self, count):
        deadline = time.monotonic() + 120 + count // 5
        while True:
            answered = int(self.postgres.query(
                "select count(distinct payload->>'id') from records where kind = 'command' and payload->>'result' = 'done'")[0][0])
            if answered >= count:
                return
            if time.monotonic() > deadline:
                raise ft.TestFailure("%d of %d pulses answered in time" % (answered, count))
            time.sleep(0.25)

    # MARK: the verdict

    def remote_records(self, gateway):
        done = subprocess.run([ft.LOCUS, "log", "export", "--state", self.state(gateway)], capture_output=True, text=True)
        return [r for r in map(json.loads, done.stdout.splitlines()) if r.get("type") == "remote"]

    def verify(self):
        status = self.status()
        for gateway in self.ids:
            state = status.get(gateway) or {}
            if state.get("applied") is None or state.get("applied") != state.get("desired"):
                self.findings.append("%s: desired %s, applied %s" % (gateway, state.get("desired"), state.get("applied")))
            self.verify_log(gateway)
        stored = ft.verify(self.postgres, self.fleet, self.expected, {})
        self.findings += stored[0]
        return stored[1]

    def verify_log(self, gateway):
        done = subprocess.run([ft.LOCUS, "log", "export", "--state", self.state(gateway)], capture_output=True, text=True)
        records = [json.loads(line) for line in done.stdout.splitlines()]
        applied = [r["version"] for r in records if r.get("type") == "remote" and r.get("remote") == "config" and r.get("result") == "applied"]
        if applied != sorted(set(applied)):
            self.findings.append("%s: configuration records out of version order: %s" % (gateway, applied))
        # From the first configuration on, the condition every version keeps is never removed
        # or added again, and its output moves only at a start (restored) or a stop (safe).
        first = next((r["seq"] for r in records if r.get("type") == "remote"), None)
        for record in records:
            if first is None or record["seq"] <= first:
                continue
            if record.get("type") in ("condition-added", "condition-removed") and record.get("monitor") == "road":
                self.findings.append("%s: the unchanged condition road/fence was %s by an apply (seq %d)" % (gateway, record["type"], record["seq"]))
            if record.get("type") == "gpio" and record.get("output") == "relay1" and record.get("cause") not in ("restored", "safe"):
                self.findings.append("%s: relay1, the unchanged condition's output, moved (seq %d, %s)" % (gateway, record["seq"], record.get("cause")))
        commands = [r for r in records if r.get("type") == "remote" and r.get("remote") == "command"]
        pulses = [r for r in records if r.get("type") == "gpio" and r.get("output") == "buzzer" and r.get("cause") == "pulse-start"]
        sent = self.sent[gateway]
        if len(commands) != sent or any(c.get("result") != "done" for c in commands) or len(pulses) != sent \
                or len({c.get("id") for c in commands}) != sent:
            self.findings.append("%s: %d command records (%s) and %d pulses for %d commands" % (
                gateway, len(commands), [c.get("result") for c in commands], len(pulses), sent))


def main(args, seed, rng, fleet_binary):
    # Scripts/fleet-test runs fleet_test.py as __main__: this module's `ft` is a second copy.
    ft.LOCUS = os.path.abspath(args.locus)
    work = tempfile.mkdtemp(prefix="locus-steer.")
    os.chmod(work, 0o755)
    postgres = ft.Postgres(os.path.join(work, "postgres"))
    broker = worker = steer = None
    failed = True
    try:
        postgres.start()
        migrate = subprocess.run([fleet_binary, "migrate", "--database", postgres.url], capture_output=True, text=True)
        if migrate.returncode != 0:
            raise ft.TestFailure("locus-fleet migrate: " + migrate.stderr.strip())
        logins = ft.Logins(args.root, fleet_binary, work, [ft.gateway_id(i) for i in range(1, args.gateways + 1)])
        broker = ft.start_broker(os.path.join(work, "broker"), logins)
        worker = ft.IngestWorker(fleet_binary, broker.port, logins, postgres.url, os.path.join(work, "ingest.log"), client_id="fleet-steer")
        worker.start()
        steer = Steer(args, work, rng, fleet_binary, broker, postgres, logins)
        steer.run()
        time.sleep(1)
        if worker.stop() != 0:
            steer.findings.append("the ingest did not exit 0 after SIGTERM: " + ft.tail(worker.log))
        totals = steer.verify()
        print()
        print("| gateways | a version to half | the next to all (kills, broker restart) | refusals | pulses | round trip p50 / p99 | records stored | faults |")
        print("|---:|---:|---:|---:|---:|---:|---:|---|")
        print("| %d (%d offline until the end) | %.1f s | %.1f s | %d canary + %d forged | %d | %.0f / %.0f ms | %d of %d | %s |" % (
            args.gateways, len(steer.offline), steer.figures["half"], steer.figures["all"], len(steer.canary), len(steer.forgeries),
            sum(steer.sent.values()), steer.figures["round trip"][0] * 1000, steer.figures["round trip"][1] * 1000,
            totals["stored"], totals["expected"], ", ".join("%d %s" % (n, k) for k, n in sorted(steer.faults.items()))))
        print()
        for finding in steer.findings:
            print("FAIL " + finding)
        if steer.findings:
            print("fleet test --steer: FAILED (%d findings); seed %d; work directory kept: %s" % (len(steer.findings), seed, work))
            return 1
        print("fleet test --steer: passed: every gateway on its desired version, every refusal logged, every pulse run once")
        failed = False
        return 0
    except (ft.TestFailure, ft.servers.ServerError) as error:
        print("fleet test --steer: %s; seed %d; work directory kept: %s" % (error, seed, work))
        return 1
    finally:
        ft.STOPPING.set()
        for process in (steer.processes.values() if steer else []):
            if process.poll() is None:
                process.kill()
                process.wait()
        if worker and worker.alive():
            worker.process.kill()
            worker.process.wait()
        if broker:
            try:
                broker.stop()
            except ft.servers.ServerError:
                pass
        postgres.stop()
        if not failed and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
