#!/usr/bin/env python3
"""A fake GNSS receiver on a pseudo-terminal, for the agent's receiver tests.

Its slave end is linked at --link (as `locus feed` does for the simulated board). Everything the
agent writes is decoded independently of Locus: UBX frames with pyubx2 (checksum validated),
PMTK sentences by hand with the NMEA XOR checksum checked here. Each decoded message is appended
to --report as one JSON line, and answered the way a receiver would:

  u-blox    ACK-ACK built by pyubx2, ACK-NAK for the messages named by --nak, nothing for those
            named by --silent and for RXM-PMREQ (never acknowledged)
  MediaTek  $PMTK001,<type>,3 (succeeded), flag 1 (unsupported) for types named by --unsupported,
            nothing for PMTK161 (the receiver is asleep)

NMEA lines from --nmea are written in between, one every --line-interval seconds (0.1 by
default), round and round; with --quiet-asleep none while the receiver is in backup (after an
RXM-PMREQ, until wake-up bytes), as a real one sends nothing then, and the first line after the
wake is reported ("resumed"). SIGUSR1 replugs
the receiver: a new pseudo-terminal is linked at the same path and the old one is closed (the
agent sees its port go away). The script ends on SIGTERM, or by itself after --lifetime seconds.
"""
import argparse
import json
import os
import select
import signal
import sys
import time
import tty

from pyubx2 import GET, SET, UBXMessage, UBXReader


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--link", required=True)
    parser.add_argument("--family", choices=["ublox", "mediatek"], required=True)
    parser.add_argument("--report", required=True)
    parser.add_argument("--nak", action="append", default=[])
    parser.add_argument("--silent", action="append", default=[])
    parser.add_argument("--unsupported", action="append", type=int, default=[])
    parser.add_argument("--nmea")
    parser.add_argument("--lifetime", type=float, default=120)
    parser.add_argument("--line-interval", type=float, default=0.1)
    parser.add_argument("--quiet-asleep", action="store_true")
    parser.add_argument("--wedge-after", type=float)
    parser.add_argument("--wedge-heals-on", choices=["reset", "power", "never"], default="reset")
    args = parser.parse_args()

    report_file = open(args.report, "a", buffering=1)

    def report(**fields):
        fields["t"] = round(time.monotonic(), 3)
        report_file.write(json.dumps(fields) + "\n")

    nmea = []
    if args.nmea:
        with open(args.nmea, "rb") as f:
            nmea = [line for line in f.read().split(b"\n") if line.strip()]
            nmea = [line.rstrip(b"\r") + b"\r\n" for line in nmea]

    state = {"replug": False, "stop": False, "asleep": False, "resumed": False, "wedged": False, "power": False}
    wedge_at = time.monotonic() + args.wedge_after if args.wedge_after is not None else None
    # The test runner may start this process with signals blocked: take them.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM])
    signal.signal(signal.SIGUSR2, lambda *_: state.__setitem__("power", True))
    signal.signal(signal.SIGUSR1, lambda *_: state.__setitem__("replug", True))
    signal.signal(signal.SIGTERM, lambda *_: state.__setitem__("stop", True))

    def open_port():
        master, slave = os.openpty()
        tty.setraw(master)
        tty.setraw(slave)
        os.set_blocking(master, False)
        directory = os.path.dirname(args.link)
        if directory:
            os.makedirs(directory, mode=0o750, exist_ok=True)
        temporary = args.link + ".new"
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(os.ttyname(slave), temporary)
        os.replace(temporary, args.link)
        report(event="opened", pty=os.ttyname(slave))
        return master, slave

    master, slave = open_port()
    pending = bytearray()
    outgoing = bytearray()
    next_nmea = time.monotonic()
    nmea_index = 0
    deadline = time.monotonic() + args.lifetime

    def nmea_line(body):
        computed = 0
        for character in body.encode("ascii"):
            computed ^= character
        return ("$%s*%02X\r\n" % (body, computed)).encode("ascii")

    def unwedge(cause):
        if not state["wedged"] or args.wedge_heals_on != cause:
            return
        state["wedged"] = False
        report(event="unwedged", cause=cause)
        banner = "GNTXT,01,01,02,u-blox AG - www.u-blox.com" if args.family == "ublox" else "PMTK010,001"
        outgoing.extend(nmea_line(banner))

    def answer_ubx(frame):
        try:
            message = UBXReader.parse(bytes(frame), msgmode=SET)
        except Exception as error:  # a frame pyubx2 rejects is reported, never answered
            report(event="ubx-error", error=str(error), hex=bytes(frame).hex())
            return
        fields = {}
        for name, value in vars(message).items():
            if name.startswith("_"):
                continue
            fields[name] = value.hex() if isinstance(value, (bytes, bytearray)) else value
        identity = message.identity
        report(event="ubx", identity=identity, cls=frame[2], id=frame[3], fields=fields, wedged=state["wedged"])
        if identity == "CFG-RST":
            unwedge("reset")
            return
        if state["wedged"]:
            return
        if identity == "RXM-PMREQ" and args.quiet_asleep:
            state["asleep"] = True
        if identity == "RXM-PMREQ" or identity in args.silent or frame[2] != 0x06:
            return
        kind = "ACK-NAK" if identity in args.nak else "ACK-ACK"
        outgoing.extend(UBXMessage("ACK", kind, GET, clsID=frame[2], msgID=frame[3]).serialize())

    def answer_pmtk(line):
        text = line.decode("ascii", "replace")
        star = text.rfind("*")
        body = text[1:star] if star > 0 else text[1:]
        computed = 0
        for character in body.encode("ascii", "replace"):
            computed ^= character
        checksum_ok = star > 0 and text[star + 1:].upper() == "%02X" % computed
        parts = body.split(",")
        if not parts[0].startswith("PMTK") or not parts[0][4:].isdigit():
            report(event="pmtk-error", line=text)
            return
        packet = int(parts[0][4:])
        report(event="pmtk", type=packet, fields=parts[1:], checksum_ok=checksum_ok, line=text, wedged=state["wedged"])
        if checksum_ok and packet in (101, 103, 104):
            unwedge("reset")
            return
        if not checksum_ok or packet == 161 or state["wedged"]:
            return
        flag = 1 if packet in args.unsupported else 3
        reply = "PMTK001,%d,%d" % (packet, flag)
        computed = 0
        for character in reply.encode("ascii"):
            computed ^= character
        outgoing.extend(("$%s*%02X\r\n" % (reply, computed)).encode("ascii"))

    def skip_to(marker):
        """Where the next frame or line starts: -1 if none yet; bytes before it are reported
        and dropped (then the caller looks again)."""
        start = pending.find(marker)
        if start > 0:
            report(event="skipped", hex=bytes(pending[:start]).hex())
            del pending[:start]
        return start

    def decode():
        # Wake-up bytes (0xFF) first, then whole frames or lines; anything else is skipped.
        while pending:
            if pending[0] == 0xFF:
                count = 0
                while count < len(pending) and pending[count] == 0xFF:
                    count += 1
                report(event="wake", bytes=count)
                if state["asleep"]:
                    state["asleep"] = False
                    state["resumed"] = True
                del pending[:count]
            elif args.family == "ublox":
                start = skip_to(b"\xb5\x62")
                if start < 0:
                    return
                if start > 0:
                    continue
                if len(pending) < 6:
                    return
                length = pending[4] | pending[5] << 8
                if len(pending) < 8 + length:
                    return
                frame = pending[:8 + length]
                del pending[:8 + length]
                answer_ubx(frame)
            else:
                start = skip_to(b"$")
                if start < 0:
                    return
                if start > 0:
                    continue
                end = pending.find(b"\r\n")
                if end < 0:
                    return
                line = bytes(pending[:end])
                del pending[:end + 2]
                answer_pmtk(line)

    while not state["stop"] and time.monotonic() < deadline:
        if state["replug"]:
            state["replug"] = False
            old_master, old_slave = master, slave
            master, slave = open_port()
            os.close(old_master)
            os.close(old_slave)
            pending.clear()
            outgoing.clear()
            report(event="replugged")
        try:
            readable, _, _ = select.select([master], [], [], 0.02)
        except InterruptedError:
            continue
        if readable:
            try:
                data = os.read(master, 4096)
            except (BlockingIOError, InterruptedError):
                data = b""
            pending.extend(data)
            decode()
        now = time.monotonic()
        if wedge_at is not None and now >= wedge_at:
            wedge_at = None
            state["wedged"] = True
            report(event="wedged")
        if state["power"]:
            state["power"] = False
            report(event="power-cycled")
            unwedge("power")
        if nmea and now >= next_nmea and not state["asleep"] and not state["wedged"]:
            if state["resumed"]:
                state["resumed"] = False
                report(event="resumed")
            outgoing.extend(nmea[nmea_index % len(nmea)])
            nmea_index += 1
            next_nmea = now + args.line_interval
        if outgoing:
            try:
                written = os.write(master, bytes(outgoing))
                del outgoing[:written]
            except (BlockingIOError, InterruptedError):
                pass
    if os.path.islink(args.link):
        os.unlink(args.link)
    report(event="stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
