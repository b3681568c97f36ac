"""`Scripts/fleet-test --cluster`: the fleet on the clustered broker (docs/fleet.md, "A clustered
broker"): three NATS 2.9 nodes (Scripts/lib/start-nats, MQTT on JetStream with replicas 3),
PostgreSQL 15 with a synchronous standby (streaming replication; the workers' connection string
names both, with target_session_attrs=read-write), two `locus-fleet ingest --nats` workers
sharing one durable consumer, and N
gateways, each a real `locus run` whose `[uplink] broker` lists the three nodes (each gateway's
list starts at another node, so the fleet is spread over them).

Faults, each chosen with the seed and printed when it happens:
  - a node killed (kill -9) while the first wave drains, started again once a third of the
    fleet is done, and waited for until its replicas are current;
  - then another node stalled (SIGSTOP) for 20 s and resumed: its gateways and worker leave it
    (PINGREQ or PING unanswered) for the others;
  - a worker killed (kill -9) mid-drain and started again 2 s later with the same name;
  - the primary crashed (pg_ctl stop -m immediate) once a sixth of the fleet is done, and the
    standby promoted: the workers find it by themselves; the store is read there at the end;
  - a few gateways killed (kill -9) mid-drain and started again: they resume from their logs.

Then, as the fleet test: for each gateway the stored seqs equal the published seqs of its log,
none missing or doubled; count(*) equals the total; `locus-fleet status` finds no gap; the
quarantine is empty; every gateway ends offline; both workers exit 0 on SIGTERM.
"""

import collections
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import json

import fleet_test as ft
import servers


class Node:
    """One nats-server under Scripts/lib/start-nats, on fixed ports kept across restarts."""

    def __init__(self, work, index):
        self.name = "n%d" % (index + 1)
        self.directory = os.path.join(work, "nats", self.name)
        os.makedirs(self.directory)
        self.client, self.route, self.mqtt = ft.free_port(), ft.free_port(), ft.free_port()
        self.helper = None
        self.pid = None

    def start(self, peers):
        command = [os.path.join(servers.LIBRARY, "start-nats"), self.directory, self.name, str(self.client), str(self.route),
                   str(self.mqtt)] + [str(p.route) for p in peers]
        self.helper, fields = servers._start_helper(command, self.directory, "nats.ready", "NATS node " + self.name, 30)
        self.pid = int(fields[0])

    def kill(self):
        if self.helper is None:
            return
        for number in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(self.pid, number)
            except ProcessLookupError:
                pass
        self.helper.wait()
        self.helper = None

    def signal(self, number):
        os.kill(self.pid, number)

    def serves(self):
        """A QoS 1 message taken through its MQTT port."""
        done = subprocess.run(["timeout", "10", "mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.mqtt), "-q", "1",
                               "-i", "fleet-test-probe-" + self.name, "-t", "locus-probe/ready", "-m", "ready"],
                              capture_output=True)
        return done.returncode == 0

    def stream_info(self):
        """$JS.API.STREAM.INFO.$MQTT_msgs through this node's client port (NATS's text protocol)."""
        with socket.create_connection(("127.0.0.1", self.client), timeout=5) as s:
            s.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _INBOX.fleet-test 1\r\n'
                      b'PUB $JS.API.STREAM.INFO.$MQTT_msgs _INBOX.fleet-test 0\r\n\r\n')
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    raise OSError("closed")
                data += chunk
                at = data.find(b"MSG _INBOX.fleet-test ")
                if at < 0:
                    continue
                end = data.find(b"\r\n", at)
                if end < 0:
                    continue
                size = int(data[at:end].split()[-1])
                body = data[end + 2:end + 2 + size]
                if len(body) == size:
                    return json.loads(body)

    def current(self, replicas):
        try:
            cluster = self.stream_info().get("cluster") or {}
        except (OSError, ValueError):
            return False
        others = cluster.get("replicas") or []
        return bool(cluster.get("leader")) and len(others) == replicas - 1 and all(
            r.get("current") and not r.get("offline") for r in others)


class Worker(ft.IngestWorker):
    """`locus-fleet ingest --nats`: ready when it has found the consumer ("messages waiting")."""

    READY = "messages waiting"

    def __init__(self, fleet, nodes, database, log, name):
        self.command = [fleet, "ingest", "--nats", nodes, "--database", database, "--client-id", name,
                        "--ack-wait", "5", "--keepalive", "5"]
        self.name = name
        self.log = log
        self.process = None
        self.cpu = 0.0
        self.restarting = False


class Gateway(ft.Gateway):
    """A gateway whose [uplink] lists the cluster's nodes, starting at its own."""

    def __init__(self, index, variant, work, nodes):
        self.id = ft.gateway_id(index)
        self.variant = variant
        self.directory = os.path.join(work, "gateways", self.id)
        self.state = os.path.join(self.directory, "state")
        self.site = os.path.join(self.directory, "site.toml")
        self.log = os.path.join(self.directory, "agent.log")
        order = nodes[index % len(nodes):] + nodes[:index % len(nodes)]
        brokers = ", ".join('"mqtt://127.0.0.1:%d"' % n.mqtt for n in order)
        # keepalive 5 s: a stalled node is left within 15 s (a PINGREQ unanswered for 10 s).
        self.site_text = variant["site_text"] + "\n".join([
            "", "[uplink]", "broker = [%s]" % brokers, 'gateway = "%s"' % self.id, "max_inflight = 32", 'keepalive = "5s"', ""])
        self.process = None
        self.runs = 0
        self.kill_fraction = None
        self.killing = False
        self.killed = False
        self.initial_backlog = None
        self.progress = 0.0
        self.not_before = 0.0
        self.stopping_since = None
        self.done = False
        self.expected = None
        self.started_at = None
        self.stopped_at = None


def wait_until(what, seconds, condition):
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise ft.TestFailure("%s: not within %d s" % (what, seconds))
        time.sleep(0.25)


def main(args, seed, rng, fleet_binary):
    ft.LOCUS = os.path.abspath(args.locus)
    work = tempfile.mkdtemp(prefix="locus-cluster.")
    os.chmod(work, 0o755)
    postgres = ft.Postgres(os.path.join(work, "postgres"))
    standby = ft.Postgres(os.path.join(work, "standby"), standby_of=postgres)
    nodes = []
    workers = []
    gateways = []
    problems = []
    faults = collections.defaultdict(int)
    failed = True

    def fault(name, text):
        faults[name] += 1
        ft.say("FAULT " + text)

    try:
        postgres.start()
        migrate = subprocess.run([fleet_binary, "migrate", "--database", postgres.url], capture_output=True, text=True)
        if migrate.returncode != 0:
            raise ft.TestFailure("locus-fleet migrate: " + migrate.stderr.strip())
        standby.start()
        ft.say("PostgreSQL primary on 127.0.0.1:%d, synchronous standby on %d" % (postgres.port, standby.port))
        database = "postgresql://fleet:fleet-secret@127.0.0.1:%d,127.0.0.1:%d/fleet?target_session_attrs=read-write" % (
            postgres.port, standby.port)
        nodes = [Node(work, i) for i in range(3)]
        for node in nodes:
            node.start([p for p in nodes if p is not node])
        for node in nodes:
            wait_until("NATS node %s serving MQTT at QoS 1" % node.name, 60, node.serves)
        ft.say("NATS cluster: %s (clients %s, MQTT %s)" % (", ".join(n.name for n in nodes),
                                                         ",".join(str(n.client) for n in nodes), ",".join(str(n.mqtt) for n in nodes)))
        nats = ",".join("127.0.0.1:%d" % n.client for n in nodes)
        # Their first nodes, from their names: fleet-a's is n3, fleet-c's n2.
        workers = [Worker(fleet_binary, nats, database, os.path.join(work, "ingest-%s.log" % name), name) for name in ("fleet-a", "fleet-c")]
        for worker in workers:
            worker.start()
        ft.say("ingest: %s on the consumer locus-ingest" % ", ".join(w.name for w in workers))

        variants = []
        for variant in ft.VARIANTS:
            variant = dict(variant)
            directory = os.path.join(work, "variants", variant["name"])
            site, variant["state"] = ft.make_variant(args.root, ft.LOCUS, variant, directory, args.events_per_gateway)
            with open(site) as f:
                variant["site_text"] = f.read()
            variants.append(variant)
        gateways = [Gateway(i, variants[(i - 1) % len(variants)], work, nodes) for i in range(1, args.gateways + 1)]
        parallel = min(args.parallel, len(gateways))
        for gateway in rng.sample(gateways[:parallel], min(2, parallel)):
            gateway.kill_fraction = rng.uniform(0.2, 0.8)

        store = postgres
        stall_began = stall_ended = None
        began = time.monotonic()
        pending = list(gateways)
        running = []
        done = 0
        node_killed = node_back = worker_killed = promoted = False
        stall = None
        # Until every gateway is done and every fault injected (a fleet that drains faster than
        # the plan still meets them all), and the stalled node is running again.
        while pending or running or stall is not None or not (promoted and node_back):
            while pending and len(running) < parallel:
                gateway = pending.pop(0)
                gateway.start(gateway.variant["state"])
                gateway.started_at = time.monotonic()
                running.append(gateway)
                if gateway.kill_fraction is not None and gateway.runs == 1:
                    gateway.killing = True
                    threading.Thread(target=ft.kill_mid_drain, args=(gateway, faults), daemon=True).start()
            if not node_killed and time.monotonic() - began > 1.5:
                node_killed = True
                nodes[0].kill()
                fault("node kill -9", "kill -9 of NATS node n1 while %d gateways drain" % len(running))
            if node_killed and not worker_killed and time.monotonic() - began > 3:
                worker_killed = True
                workers[1].kill9()
                fault("worker kill -9", "kill -9 of ingest %s; started again in 2 s" % workers[1].name)
                time.sleep(2)
                workers[1].start()
            if not promoted and done >= max(1, len(gateways) // 6):
                promoted = True
                committed = postgres.try_count("select count(*) from records")
                postgres.crash()
                standby.promote()
                on_standby = standby.try_count("select count(*) from records")
                fault("primary promoted away", "the primary crashed with %s records committed; the standby, promoted, holds %s" % (
                    committed, on_standby))
                if committed is None or on_standby is None or on_standby < committed:
                    problems.append("the promoted standby holds %s records, the primary had committed %s" % (on_standby, committed))
                store = standby
            if not node_back and done >= len(gateways) // 3:
                node_back = True
                nodes[0].start(nodes[1:])
                wait_until("n1's replicas current again", 90, lambda: nodes[0].serves() and nodes[0].current(3))
                ft.say("n1 started again and current")
                nodes[2].signal(signal.SIGSTOP)
                stall = stall_began = time.monotonic()
                fault("node stalled", "SIGSTOP of NATS node n3 for 20 s")
            if stall is not None and time.monotonic() - stall > 20:
                nodes[2].signal(signal.SIGCONT)
                ft.say("n3 resumed")
                stall, stall_ended = None, time.monotonic()
            for gateway in list(running):
                if gateway.process.poll() is not None:
                    if gateway.killed or gateway.killing:
                        if not gateway.killing:
                            gateway.start(gateway.variant["state"])
                        continue
                    problems.append("%s exited %d by itself: %s" % (gateway.id, gateway.process.returncode, ft.tail(gateway.log)))
                    running.remove(gateway)
                    continue
                if gateway.killing:
                    continue
                if gateway.observe(ft.agent_status(gateway.state)):
                    gateway.process.send_signal(signal.SIGTERM)
                    gateway.process.wait()
                    gateway.expected = ft.published_seqs(ft.LOCUS, gateway.state)
                    gateway.stopped_at = time.monotonic()
                    running.remove(gateway)
                    done += 1
            time.sleep(0.1)
        if stall is not None:
            nodes[2].signal(signal.SIGCONT)
            stall_ended = time.monotonic()
        drained = time.monotonic() - began
        ft.say("every gateway drained and stopped: %.1f s" % drained)

        expected = {g.id: g.expected for g in gateways if g.expected is not None}
        total = sum(len(s) for s in expected.values())
        ft.wait_for_store(store, total, stall_seconds=60)
        time.sleep(1)
        for worker in workers:
            if not worker.alive():
                problems.append("ingest %s is not running at the end: %s" % (worker.name, ft.tail(worker.log)))
            code = worker.stop()
            if code != 0:
                problems.append("ingest %s exited %s after SIGTERM: %s" % (worker.name, code, ft.tail(worker.log)))
        findings, totals, _ = ft.verify(store, fleet_binary, expected, {})
        # A status published while a node was stalled may be stored when it resumes, after the
        # gateway's later `offline`, so that the status reads online (docs/fleet.md, the NATS
        # limits). Only a gateway that ran while the node was stalled is excused.
        logs = {g.id: open(g.log, errors="replace").read() for g in gateways}
        during = {g.id for g in gateways if g.started_at <= stall_ended and (g.stopped_at or stall_ended) >= stall_began}
        excused = [g for g in totals["still online"] if g in during]
        if excused:
            ft.say("note: %s online at the end: each ran while n3 was stalled" % ", ".join(sorted(excused)))
        others = sorted(set(totals["still online"]) - set(excused))
        if others:
            findings.append("gateways still online at the end: %s" % ft.abbreviate(others))
        moved = sum(1 for g in gateways if "trying node" in logs[g.id])
        left = [w.name for w in workers if "lost or stalled" in open(w.log, errors="replace").read()]
        rate = store.query("select count(*), extract(epoch from max(received_at) - min(received_at)) from records")[0]
        span = float(rate[1] or 0)
        print()
        print("| gateways | records | stored | missing | doubled | gateways that changed node | workers that left a stalled node | faults | drain | ingest rate |")
        print("|---:|---:|---:|---:|---:|---:|---|---|---:|---:|")
        print("| %d | %d | %d | %d | %d | %d | %s | %s | %.1f s | %.0f records/s |" % (
            len(gateways), totals["expected"], totals["stored"], totals["missing"], totals["doubled"], moved, ", ".join(left) or "none",
            ", ".join("%d %s" % (n, name) for name, n in sorted(faults.items())), drained, int(rate[0]) / span if span > 0 else 0))
        print()
        for name in ("node kill -9", "node stalled", "worker kill -9", "gateway kill -9", "primary promoted away"):
            if name not in faults:
                problems.append("the fault '%s' was not injected" % name)
        if moved == 0:
            problems.append("no gateway moved to another node")
        problems += findings
        for line in problems:
            print("FAIL " + line)
        if problems:
            print("fleet test --cluster: FAILED (%d findings); seed %d; work directory kept: %s" % (len(problems), seed, work))
            return 1
        print("fleet test --cluster: passed: %d records from %d gateways stored exactly once through a node killed, "
              "a node stalled, the primary promoted away, a worker and %d gateways killed" % (
                  totals["stored"], len(gateways), faults.get("gateway kill -9", 0)))
        failed = False
        return 0
    except (ft.TestFailure, servers.ServerError) as error:
        print("fleet test --cluster: %s; seed %d; work directory kept: %s" % (error, seed, work))
        return 1
    finally:
        ft.STOPPING.set()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for worker in workers:
            if worker.alive():
                worker.process.kill()
                worker.process.wait()
        for gateway in gateways:
            if gateway.process and gateway.process.poll() is None:
                gateway.process.kill()
                gateway.process.wait()
        for node in nodes:
            node.kill()
        standby.stop()
        postgres.stop()
        if not args.keep and not failed:
            shutil.rmtree(work, ignore_errors=True)
        elif args.keep:
            print("work directory: %s" % work)
