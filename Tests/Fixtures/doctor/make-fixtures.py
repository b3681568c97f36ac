#!/usr/bin/env python3
"""Writes the fixture roots `locus doctor --root DIR` reads in DoctorTests (run from this folder;
the trees are committed, this script documents and regenerates them).

Each root holds etc/locus/site.toml (found without --config, as `locus run` finds it) and its
board, and the system files doctor reads. The receiver's terminal is a link to /dev/null: a
character device (1:3) on every machine, which /proc/consoles fixtures name by that number; it
is not a terminal, so the byte check says so and moves on."""
import os
import shutil

BOARD = """[board]
name = "{name}"

[gnss]
device = "{device}"
baud = 9600
receiver = "ublox"

[bluetooth]
hci = 0
{extra}"""

SITE = """board = "board.toml"
state_dir = "/var/lib/locus"

[log]
segment_size = "1MiB"
retain = "1MiB"
"""

PI4_TREE = {
    "proc/device-tree/model": b"Raspberry Pi 4 Model B Rev 1.4\0",
    "proc/device-tree/aliases/serial0": b"/soc/serial@7e215040\0",
    "proc/device-tree/aliases/serial1": b"/soc/serial@7e201000\0",
    "proc/device-tree/soc/serial@7e215040/compatible": b"brcm,bcm2835-aux-uart\0",
    "proc/device-tree/soc/serial@7e201000/compatible": b"arm,pl011\0arm,primecell\0",
    "proc/device-tree/soc/serial@7e201000/bluetooth/status": b"okay\0",
}


def write(root, path, contents):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(contents if isinstance(contents, bytes) else contents.encode())


def link(root, path, target):
    full = os.path.join(root, path)
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.symlink(target, full)


def base(name, board_name="Test gateway", device="/dev/serial0", terminal="ttyS0", extra="", cap_eff="0000000000003000",
         cmdline="console=tty1 root=/dev/mmcblk0p2 rootwait", consoles="tty1                 -WU (EC p  )    4:1\n", rfkill_soft="0"):
    root = name
    shutil.rmtree(root, ignore_errors=True)
    write(root, "etc/locus/site.toml", SITE)
    write(root, "etc/locus/board.toml", BOARD.format(name=board_name, device=device, extra=extra))
    if device == "/dev/serial0":
        link(root, "dev/serial0", terminal)
    link(root, "dev/" + terminal, "/dev/null")
    write(root, "proc/cmdline", cmdline + "\n")
    write(root, "proc/consoles", consoles)
    write(root, "proc/self/status", "Name:\tlocus\nCapInh:\t0000000000000000\nCapEff:\t%s\n" % cap_eff)
    write(root, "var/lib/locus/.keep", "")
    write(root, "sys/class/bluetooth/hci0/.keep", "")
    for key, value in {"type": "bluetooth", "name": "hci0", "soft": rfkill_soft, "hard": "0"}.items():
        write(root, "sys/class/rfkill/rfkill0/" + key, value + "\n")
    return root


def pi(root, tree, config):
    for path, contents in tree.items():
        write(root, path, contents)
    write(root, "boot/firmware/config.txt", config)


base("clean")
base("console-on-gnss", cmdline="console=serial0,115200 console=tty1 root=/dev/mmcblk0p2",
     consoles="ttyS0                -W- (EC p a)    1:3\ntty1                 -WU (E  p  )    4:1\n")
root = base("getty-enabled")
link(root, "etc/systemd/system/getty.target.wants/serial-getty@ttyS0.service", "/lib/systemd/system/serial-getty@.service")
link(root, "etc/systemd/system/getty.target.wants/getty@tty1.service", "/lib/systemd/system/getty@.service")
write(root, "proc/812/comm", "agetty\n")
link(root, "proc/812/fd/0", "/dev/ttyS0")
write(root, "proc/640/comm", "bluetoothd\n")
root = base("getty-masked")
link(root, "etc/systemd/system/getty.target.wants/serial-getty@ttyS0.service", "/lib/systemd/system/serial-getty@.service")
link(root, "etc/systemd/system/serial-getty@ttyS0.service", "/dev/null")
root = base("hci-socket-holder")
write(root, "proc/net/bluetooth/hci", "sk               RefCnt Rmem   Wmem   User   Inode  Parent\n"
      "ffff8880086c2000 2      0      0      0      31337  0\nffff8880086c4000 2      0      0      0      4242   0\n")
write(root, "proc/900/comm", "btproxy\n")
link(root, "proc/900/fd/4", "socket:[31337]")
write(root, "proc/640/comm", "bluetoothd\n")
link(root, "proc/640/fd/9", "socket:[4242]")
base("rfkill-soft", rfkill_soft="1", cap_eff="0000000000000000")
base("gpio-missing", extra='\n[gpio]\nlabel = "pinctrl-bcm2711"\n\n[gpio.outputs]\nrelay1 = { line = 17 }\n')

root = base("pi4-default", board_name="Raspberry Pi 4 Model B")
pi(root, PI4_TREE, "[pi4]\ndtoverlay=vc4-kms-v3d\n\n[all]\nenable_uart=1\n")

root = base("pi4-disable-bt", board_name="Raspberry Pi 4 Model B", terminal="ttyAMA0")
tree = dict(PI4_TREE)
tree["proc/device-tree/aliases/serial0"] = b"/soc/serial@7e201000\0"
tree["proc/device-tree/aliases/serial1"] = b"/soc/serial@7e215040\0"
tree["proc/device-tree/soc/serial@7e201000/bluetooth/status"] = b"disabled\0"
pi(root, tree, "[all]\nenable_uart=1\ndtoverlay=disable-bt\n")
shutil.rmtree(os.path.join(root, "sys/class/bluetooth"))

root = base("pi02-mini-uart-no-enable_uart", board_name="Raspberry Pi Zero 2 W")
tree = dict(PI4_TREE)
tree["proc/device-tree/model"] = b"Raspberry Pi Zero 2 W Rev 1.0\0"
pi(root, tree, "# enable_uart=1\n[pi4]\nenable_uart=1\n[gpio4=1]\ncore_freq=250\n[all]\ndtparam=audio=on\n")

root = base("pi5", board_name="Raspberry Pi 5", device="/dev/ttyAMA0", terminal="ttyAMA0")
os.remove(os.path.join(root, "dev/ttyAMA0"))
pi(root, {"proc/device-tree/model": b"Raspberry Pi 5 Model B Rev 1.0\0",
          "proc/device-tree/aliases/serial0": b"/soc/serial@7d001000\0",
          "proc/device-tree/soc/serial@7d001000/compatible": b"arm,pl011-axi\0arm,pl011\0"},
   "[all]\ndtparam=audio=on\n[pi4]\ndtparam=uart0=on\n")
