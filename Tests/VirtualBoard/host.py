#!/usr/bin/env python3
"""The host side of the virtual board: boots the guest under qemu, relays its console, streams
NMEA into the guest's GNSS UART when the guest asks, times what must be timed against the host's
clock, and counts the checks.

The guest speaks in console lines (everything else on the console is only logged):
  vboard: booted ...                  the kernel is up and the drivers are loaded
  vboard: scenario TITLE              a scenario starts (the previous one and its feed end)
  vboard: feed FROM TO                stream the recording's epochs FROM <= hhmmss < TO at their
                                      recorded pace (one epoch a second), in the background
  vboard: feed stop                   end the feed
  vboard: line NAME VALUE             the guest saw a GPIO line change (sampled in the guest)
  vboard: latency NAME VALUE HHMMSS MS  check: NAME went to VALUE within MS of sending the fix
                                      of HHMMSS
  vboard: steer config V KEY NAME     sign (with the fleet's key or "other") and publish, retained,
                                      configuration version V: the fragment NAME of FRAGMENTS
  vboard: steer command ID ACTION K=V...  sign and publish a command (expires in 10 min)
  ok    ... / FAIL  ...               a check done in the guest
  vboard: done                        all scenarios ran

The steer scenario's boot has a network (qemu's user network): the guest reaches Debian's
mosquitto, started here on 127.0.0.1, at 10.0.2.2, and gets the fleet's public key (made by
openssl) on its kernel command line.

The GNSS UART is a pseudo-terminal on the host (qemu's serial backend): qemu sets the guest's baud
rate on it, so the host's receiver (38400 baud, as the board files say) delivers what a UART at the
guest's rate would read: the sentences at 38400, framing garbage at any other rate. As on a real
line, bytes nobody reads are lost: the host sends in small slices, each rendered at the rate of
the moment it goes, and only while the guest takes them (a closed port takes nothing).
"""
import argparse
import base64
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import tty
import threading
import time

BOOT_TIMEOUT_S = 60
RUN_TIMEOUT_S = 420
RECEIVER_BAUD = 38400
SLICE_BYTES = 64            # less than a sentence: a port opened late gets no whole stale one
TAKEN_WITHIN_S = 0.3        # a slice the guest has not taken by then is lost, with the rest of its epoch
SPEEDS = {getattr(termios, f"B{rate}"): rate for rate in
          (1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600)}


class Recording:
    """The NMEA log as epochs keyed by their RMC time (hhmmss): each epoch is the RMC and the
    sentences after it up to the next RMC, sent together as a receiver sends a burst."""

    def __init__(self, path):
        self.epochs = []
        current = None
        for line in open(path, "rb"):
            if not line.startswith(b"$"):
                continue
            fields = line.split(b",")
            if fields[0].endswith(b"RMC") and len(fields) > 1:
                current = (fields[1][:6].decode(), [])
                self.epochs.append(current)
            if current:
                current[1].append(line.rstrip(b"\r\n") + b"\r\n")


def uart_read(data, sent_at, read_at):
    """What a UART at `read_at` baud reads when `data` is sent back to back at `sent_at` (8N1):
    it waits for the line to go low (a start bit), samples the 8 data bits and the stop bit in the
    middle of its own bit times, and reads a byte whose stop bit is low as NUL (a framing error,
    as Linux delivers it without PARMRK)."""
    bits = []
    for byte in data:
        bits += [0] + [(byte >> i) & 1 for i in range(8)] + [1]

    def level(t):
        k = int(t * sent_at)
        return bits[k] if k < len(bits) else 1

    read, t, period, end = bytearray(), 0.0, 1.0 / read_at, len(bits) / sent_at
    while True:
        k = int(t * sent_at)
        while k < len(bits) and bits[k] == 1:
            k += 1
        start = max(t, k / sent_at)
        if k >= len(bits) or start + 9.5 * period > end:
            return bytes(read)
        value = sum(level(start + (1.5 + i) * period) << i for i in range(8))
        read.append(value if level(start + 9.5 * period) else 0)
        t = start + 9.5 * period + period / 16


class Fleet:
    """The fleet's side of the steer scenario: a broker, two EC P-256 key pairs made by openssl
    (the fleet's, whose public key the guest trusts, and another), and the signed messages the
    guest asks for, published with mosquitto_pub."""

    GATEWAY = "vboard"
    BERTH = ('[[monitor.harbour.condition]]\nid = "berth"\ncircle = { lat = 52.85012, lon = 5.31355, radius = 60.0 }\n'
             'exit_margin = 10.0\ndwell = "3s"\n')
    QUAY = '[[monitor.harbour.condition]]\nid = "quay"\ncircle = { lat = 52.86, lon = 5.32, radius = 40.0 }\n'
    RELAY = '[[action]]\nwhen = "harbour/berth"\nstate = "satisfied"\ngpio = "relay1"\nmode = "level"\n'
    # The fragments a configuration may carry: the site's berth and action with a quay added,
    # and the berth alone, every action removed (a bare key goes before the tables).
    FRAGMENTS = {"quay": BERTH + QUAY + RELAY, "noaction": "action = []\n" + BERTH}

    def __init__(self):
        self.directory = tempfile.mkdtemp(prefix="vboard-fleet-")
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = os.path.join(self.directory, "mosquitto.conf")
        with open(config, "w") as conf:
            conf.write(f"listener {self.port} 127.0.0.1\nallow_anonymous true\npersistence false\n")
        self.broker = subprocess.Popen(["mosquitto", "-c", config], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        self.keys = {}
        for name in ("fleet", "other"):
            key = os.path.join(self.directory, name + ".key")
            self.run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
            self.keys[name] = key
        der = self.run("openssl", "ec", "-in", self.keys["fleet"], "-pubout", "-outform", "DER")
        self.public_key = base64.b64encode(der).decode()

    def run(self, *command):
        return subprocess.run(command, check=True, capture_output=True).stdout

    def signed(self, body, key):
        path = os.path.join(self.directory, "body")
        with open(path, "w") as out:
            out.write(body)
        signature = self.run("openssl", "dgst", "-sha256", "-sign", self.keys[key], path)
        return body + "# locus-signature: ecdsa-p256-sha256 " + base64.b64encode(signature).decode() + "\n"

    def publish(self, kind, message, retain):
        path = os.path.join(self.directory, "message")
        with open(path, "w") as out:
            out.write(message)
        self.run("mosquitto_pub", "-h", "127.0.0.1", "-p", str(self.port), "-q", "1", *(["-r"] if retain else []),
                 "-t", f"locus/{self.GATEWAY}/remote/{kind}", "-f", path)

    def request(self, words):
        """`steer config V KEY NAME` or `steer command ID ACTION K=V...`; False when it is
        neither."""
        if len(words) == 5 and words[1] == "config" and words[3] in self.keys and words[4] in self.FRAGMENTS:
            body = (self.FRAGMENTS[words[4]] + f'\n[fleet]\nkind = "config"\ngateway = "{self.GATEWAY}"\n'
                    f"version = {int(words[2])}\n")
            self.publish("config", self.signed(body, words[3]), retain=True)
            return True
        if len(words) >= 4 and words[1] == "command":
            keys = "".join(f'{k} = "{v}"\n' for k, v in (word.split("=", 1) for word in words[4:]))
            body = (f'[fleet]\nkind = "command"\ngateway = "{self.GATEWAY}"\nid = "{words[2]}"\n'
                    f"expires = {int(time.time()) + 600}\n\n[command]\naction = \"{words[3]}\"\n{keys}")
            self.publish("command", self.signed(body, "fleet"), retain=False)
            return True
        return False

    def close(self):
        self.broker.kill()
        self.broker.wait()
        shutil.rmtree(self.directory, ignore_errors=True)



class Board:
    def __init__(self, arch, build, abi, recording, log, scenarios, console_on_uart=False, network=False):
        """`scenarios`: the guest's scenario names, comma-separated, or "all". With
        `console_on_uart` the kernel also writes its console to the GNSS UART; with `network` the
        guest has a virtio NIC on qemu's user network and the fleet (`Fleet`) is set up."""
        self.arch, self.recording, self.log = arch, recording, log
        self.fleet = Fleet() if network else None
        self.passed = self.failed = 0
        self.sent = {}          # hhmmss -> host time the epoch was written
        self.changes = []       # (host time, name, value)
        self.scenario = None    # (title, host start time)
        self.feeds = 0          # feeds started; only the newest one writes
        self.last_baud = None
        self.uart, self.uart_guest = os.openpty()   # the host writes the receiver's side
        tty.setraw(self.uart_guest)                 # as qemu sets it; no echo before qemu opens it
        image = os.path.join(build, arch, "image")
        initrd = os.path.join(build, arch, "initrd.cpio.gz")
        nic = "user,model=virtio-net-pci" if network else "none"
        common = ["-smp", "2", "-m", "512", "-display", "none", "-monitor", "none", "-no-reboot", "-nic", nic,
                  "-initrd", initrd, "-serial", "stdio",
                  "-chardev", f"serial,id=uart1,path={os.ttyname(self.uart_guest)}"]
        append = f"quiet panic=-1 vboard={scenarios}"
        if self.fleet:
            append += f" vboard_broker=10.0.2.2:{self.fleet.port} vboard_key={self.fleet.public_key}"
        if arch == "arm64":
            # cortex-a53: -cpu max is about 3x slower under TCG (pointer authentication). The
            # console is the PL011; the UART a PCI 16550. The last console= is /dev/console.
            consoles = "console=ttyS0 console=ttyAMA0" if console_on_uart else "console=ttyAMA0"
            self.command = ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a53", *common,
                            "-kernel", f"{image}/boot/vmlinuz-{abi}-arm64", "-device", "pci-serial,chardev=uart1",
                            "-append", f"{consoles} {append}"]
        else:
            # The console is the first 16550 (ttyS0), the UART the second (ttyS1). The 8250
            # driver has one kernel console: the first ttyS named keeps it, so console=ttyS1
            # stays on the command line only (what doctor reads first, as on a Raspberry Pi).
            consoles = "console=ttyS0 console=ttyS1" if console_on_uart else "console=ttyS0"
            self.command = ["qemu-system-x86_64", "-accel", "tcg", *common,
                            "-kernel", f"{image}/vmlinux", "-serial", "chardev:uart1",
                            "-append", f"{consoles} {append}"]

    def check(self, passed, description):
        if passed:
            self.passed += 1
        else:
            self.failed += 1
        print(("ok    " if passed else "FAIL  ") + description, flush=True)

    def guest_baud(self):
        """The rate the guest set on its UART (qemu passes it to the pseudo-terminal); its changes
        are logged."""
        baud = SPEEDS.get(termios.tcgetattr(self.uart)[4], 0)
        if baud != self.last_baud:
            self.log.write(f"[uart {time.monotonic():.3f}] the guest's rate is now {baud} baud\n")
            self.last_baud = baud
        return baud

    def drain(self):
        """Reads what the guest sends on the UART (a kernel console there, receiver commands) into
        the log, so qemu never waits on a full pseudo-terminal."""
        while True:
            try:
                data = os.read(self.uart, 4096)
            except OSError:
                return
            if not data:
                return
            self.log.write(f"[uart from the guest] {data.decode(errors='replace')!r}\n")

    def taken(self):
        """Whether the guest has taken everything sent (nothing waits in the terminal), within
        TAKEN_WITHIN_S; if not, what waits is dropped: a real line does not keep it."""
        deadline = time.monotonic() + TAKEN_WITHIN_S
        while struct.unpack("i", fcntl.ioctl(self.uart_guest, termios.FIONREAD, b"\0\0\0\0"))[0] > 0:
            if time.monotonic() >= deadline:
                termios.tcflush(self.uart_guest, termios.TCIFLUSH)
                return False
            time.sleep(0.001)
        return True

    def send(self, data):
        """One epoch's bytes, slice by slice at the receiver's line rate (10 bits a byte), each at
        the guest's rate of the moment: a port opened at another rate may read a stale slice
        before its new rate takes effect, never a stale sentence."""
        began = time.monotonic()
        for start in range(0, len(data), SLICE_BYTES):
            due = began + start * 10 / RECEIVER_BAUD
            if due > time.monotonic():
                time.sleep(due - time.monotonic())
            if not self.taken():
                return
            chunk, baud = data[start:start + SLICE_BYTES], self.guest_baud()
            if baud != RECEIVER_BAUD:
                chunk = uart_read(chunk, RECEIVER_BAUD, baud or RECEIVER_BAUD)
            while chunk:
                chunk = chunk[os.write(self.uart, chunk):]

    def feed(self, first, last, generation):
        """Writes the epochs first <= hhmmss < last, one a second, on the recording's pace, until
        a newer feed starts; at the guest's baud rate when it is the receiver's, else as garbage."""
        epochs = [e for e in self.recording.epochs if first <= e[0] < last]
        start = time.monotonic()
        for index, (stamp, lines) in enumerate(epochs):
            delay = start + index - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            if generation != self.feeds:
                return
            self.sent[stamp] = time.monotonic()
            try:
                self.send(b"".join(lines))
            except OSError as error:
                print(f"vboard: feed stopped: {error}", flush=True)
                return

    def end_scenario(self):
        if self.scenario:
            title, began = self.scenario
            print(f"vboard {self.arch}: scenario '{title}' {time.monotonic() - began:.1f} s", flush=True)
            self.scenario = None

    def latency(self, name, value, stamp, limit_ms):
        sent = self.sent.get(stamp)
        after = [t for (t, n, v) in self.changes if n == name and v == value and sent is not None and t >= sent]
        if sent is None or not after:
            self.check(False, f"{name} went to {value} within {limit_ms} ms of the fix of {stamp} "
                              f"(fix {'not sent' if sent is None else 'sent'}, no change seen after it)")
            return
        delay_ms = (after[0] - sent) * 1000
        self.check(delay_ms <= limit_ms, f"{name} went to {value} {delay_ms:.0f} ms after the fix of {stamp} "
                                         f"was sent (limit {limit_ms} ms)")

    def run(self):
        began = time.monotonic()
        qemu = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT)
        threading.Thread(target=self.drain, daemon=True).start()
        booted = done = False
        timers = [threading.Timer(RUN_TIMEOUT_S, qemu.kill),
                  threading.Timer(BOOT_TIMEOUT_S, lambda: booted or qemu.kill())]
        for timer in timers:
            timer.start()
        for raw in qemu.stdout:
            line = raw.decode(errors="replace").rstrip("\r\n")
            self.log.write(line + "\n")
            self.log.flush()
            words = line.split()
            if line.startswith("ok    ") or line.startswith("FAIL  "):
                self.check(line.startswith("ok"), line[6:])
            elif line.startswith("vboard: booted"):
                booted = True
                print(f"vboard {self.arch}: boot {time.monotonic() - began:.1f} s ({line[15:]})", flush=True)
            elif line.startswith("vboard: scenario "):
                self.feeds += 1  # a scenario starts with a silent UART
                self.end_scenario()
                self.scenario = (line[17:], time.monotonic())
                print(f"== {line[8:]}", flush=True)
            elif line.startswith("vboard: feed ") and len(words) == 4:
                self.feeds += 1
                threading.Thread(target=self.feed, args=(words[2], words[3], self.feeds), daemon=True).start()
            elif line == "vboard: feed stop":
                self.feeds += 1
            elif line.startswith("vboard: line ") and len(words) >= 4:
                self.changes.append((time.monotonic(), words[2], words[3]))
            elif line.startswith("vboard: latency ") and len(words) == 6:
                self.latency(words[2], words[3], words[4], int(words[5]))
            elif line.startswith("vboard: steer ") and self.fleet:
                try:
                    if not self.fleet.request(words[1:]):
                        self.check(False, f"the host understands '{line}'")
                except (subprocess.CalledProcessError, ValueError) as error:
                    self.check(False, f"the host signs and publishes for '{line}': {error}")
            elif line.startswith("vboard: done"):
                done = True
            elif line.startswith("vboard: "):
                print(line, flush=True)
        self.end_scenario()
        for timer in timers:
            timer.cancel()
        if qemu.poll() is None:
            qemu.kill()
        qemu.wait()
        if self.fleet:
            self.fleet.close()
        self.check(booted, f"{self.arch}: the guest booted")
        self.check(done, f"{self.arch}: every scenario ran to its end")
        print(f"vboard {self.arch}: run {time.monotonic() - began:.1f} s")


# Scenarios that need a boot of their own, and the kernel command line's part they need.
OWN_BOOT = {"doctor_console": {"console_on_uart": True}, "steer": {"network": True}}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", required=True, choices=["arm64", "amd64"])
    parser.add_argument("--build", required=True)
    parser.add_argument("--abi", required=True)
    parser.add_argument("--nmea", required=True)
    parser.add_argument("--scenarios", default="all",
                        help="the guest's scenario names, comma-separated (fence,beacon,...,doctor_console); all by default")
    arguments = parser.parse_args()
    wanted = arguments.scenarios.split(",")
    boots = []
    shared = [name for name in wanted if name not in OWN_BOOT]
    if shared:
        boots.append(("console.log", ",".join(shared), {}))
    for name, options in OWN_BOOT.items():
        if name in wanted or wanted == ["all"]:
            boots.append((f"console-{name}.log", name, options))
    passed = failed = 0
    recording = Recording(arguments.nmea)
    for log_name, scenarios, options in boots:
        console = os.path.join(arguments.build, arguments.arch, log_name)
        with open(console, "w") as log:
            board = Board(arguments.arch, arguments.build, arguments.abi, recording, log, scenarios, **options)
            board.run()
        print(f"vboard {arguments.arch}: the guest's console is in {console}")
        passed, failed = passed + board.passed, failed + board.failed
    print(f"vboard {arguments.arch}: {passed} passed, {failed} failed")
    # Scripts/vboard adds up the architectures' counts for its last line.
    with open(os.path.join(arguments.build, arguments.arch, "checks"), "w") as counts:
        counts.write(f"{passed} {failed}\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
