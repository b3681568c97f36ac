#!/usr/bin/env python3
"""The service UUIDs of advertising data as Home Assistant's parser reads them: the independent
implementation Locus's 128-bit (and 16/32-bit) UUID handling is tested against.

Reads one AD payload a line (hex) on standard input and writes one JSON object a line:
  {"services": [...], "service_data": [[uuid, hex], ...], "solicited": [...]}
UUIDs in lower case, as bluetooth-data-tools writes them. Runs in the venv that
`Scripts/install-deps --test` makes (.build/pyvenv), with bluetooth-data-tools pinned there.

bluetooth-data-tools does not read service solicitation (0x14, 0x15, 0x1F). Each solicitation
structure is handed to it again as the service UUID list of the same width (0x03, 0x07, 0x05),
so the UUIDs still come from its conversion, not from this script.
"""
import json
import sys

from bluetooth_data_tools import parse_advertisement_data_bytes

SOLICITATION_AS_LIST = {0x14: 0x03, 0x15: 0x07, 0x1F: 0x05}


def structures(data: bytes):
    """(type, payload) of each AD structure, stopping at a zero length or a structure that
    runs past the end (the caller hands over data that Locus walked cleanly)."""
    offset = 0
    while offset < len(data):
        length = data[offset]
        if length == 0 or offset + 1 + length > len(data):
            return
        yield data[offset + 1], data[offset + 2:offset + 1 + length]
        offset += 1 + length


def describe(data: bytes) -> dict:
    _, services, service_data, _, _ = parse_advertisement_data_bytes(data)
    solicited = []
    for kind, payload in structures(data):
        if kind in SOLICITATION_AS_LIST and payload:
            as_list = bytes([len(payload) + 1, SOLICITATION_AS_LIST[kind]]) + payload
            solicited += parse_advertisement_data_bytes(as_list)[1]
    return {
        "services": list(services),
        "service_data": [[uuid, value.hex()] for uuid, value in service_data.items()],
        "solicited": solicited,
    }


def main() -> int:
    for line in sys.stdin:
        line = line.strip()
        sys.stdout.write(json.dumps(describe(bytes.fromhex(line))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
