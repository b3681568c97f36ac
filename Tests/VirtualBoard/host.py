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
  ok    ... / FAIL  ...               a check done in the guest
  vboard: done                        all scenarios ran
"""
import argparse
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time

BOOT_TIMEOUT_S = 60
RUN_TIMEOUT_S = 420


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


class Board:
    def __init__(self, arch, build, abi, recording, log):
        self.arch, self.recording, self.log = arch, recording, log
        self.passed = self.failed = 0
        self.sent = {}          # hhmmss -> host time the epoch was written
        self.changes = []       # (host time, name, value)
        self.scenario = None    # (title, host start time)
        self.feeds = 0          # feeds started; only the newest one writes
        self.directory = tempfile.mkdtemp(prefix="vboard-")
        self.socket_path = os.path.join(self.directory, "uart.sock")
        image = os.path.join(build, arch, "image")
        initrd = os.path.join(build, arch, "initrd.cpio.gz")
        common = ["-smp", "2", "-m", "512", "-display", "none", "-monitor", "none", "-no-reboot", "-nic", "none",
                  "-initrd", initrd, "-serial", "stdio",
                  "-chardev", f"socket,id=uart1,path={self.socket_path},server=on,wait=off"]
        if arch == "arm64":
            # cortex-a53: -cpu max is about 3x slower under TCG (pointer authentication). The
            # console is the PL011; the UART a PCI 16550.
            self.command = ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a53", *common,
                            "-kernel", f"{image}/boot/vmlinuz-{abi}-arm64", "-device", "pci-serial,chardev=uart1",
                            "-append", "console=ttyAMA0 quiet panic=-1"]
        else:
            # The console is the first 16550 (ttyS0), the UART the second (ttyS1).
            self.command = ["qemu-system-x86_64", "-accel", "tcg", *common,
                            "-kernel", f"{image}/vmlinux", "-serial", "chardev:uart1",
                            "-append", "console=ttyS0 quiet panic=-1"]

    def check(self, passed, description):
        if passed:
            self.passed += 1
        else:
            self.failed += 1
        print(("ok    " if passed else "FAIL  ") + description, flush=True)

    def feed(self, first, last, uart, generation):
        """Writes the epochs first <= hhmmss < last, one a second, on the recording's pace, until
        a newer feed starts."""
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
                uart.sendall(b"".join(lines))
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
        uart = None
        for _ in range(100):
            try:
                uart = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                uart.connect(self.socket_path)
                break
            except OSError:
                uart = None
                time.sleep(0.05)
        if uart is None:
            qemu.kill()
            self.check(False, "qemu started with the UART socket")
            return
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
                threading.Thread(target=self.feed, args=(words[2], words[3], uart, self.feeds), daemon=True).start()
            elif line == "vboard: feed stop":
                self.feeds += 1
            elif line.startswith("vboard: line ") and len(words) >= 4:
                self.changes.append((time.monotonic(), words[2], words[3]))
            elif line.startswith("vboard: latency ") and len(words) == 6:
                self.latency(words[2], words[3], words[4], int(words[5]))
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
        self.check(booted, f"{self.arch}: the guest booted")
        self.check(done, f"{self.arch}: every scenario ran to its end")
        print(f"vboard {self.arch}: run {time.monotonic() - began:.1f} s")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", required=True, choices=["arm64", "amd64"])
    parser.add_argument("--build", required=True)
    parser.add_argument("--abi", required=True)
    parser.add_argument("--nmea", required=True)
    arguments = parser.parse_args()
    console = os.path.join(arguments.build, arguments.arch, "console.log")
    with open(console, "w") as log:
        board = Board(arguments.arch, arguments.build, arguments.abi, Recording(arguments.nmea), log)
        board.run()
    print(f"vboard {arguments.arch}: the guest's console is in {console}")
    print(f"vboard {arguments.arch}: {board.passed} passed, {board.failed} failed")
    # Scripts/vboard adds up the architectures' counts for its last line.
    with open(os.path.join(arguments.build, arguments.arch, "checks"), "w") as counts:
        counts.write(f"{board.passed} {board.failed}\n")
    sys.exit(1 if board.failed else 0)


if __name__ == "__main__":
    main()
