#!/usr/bin/env python3
"""Outside references for resolvable private addresses (PrivateAddressTests).

  irk_oracle.py ah       stdin: "IRK PRAND" per line (hex, most significant byte first);
                         stdout: ah(IRK, PRAND) in hex, from the `cryptography` package's AES-128.
  irk_oracle.py resolve  stdin: the keys on the first line (hex, space-separated), then one
                         address a line ("4a:bc:..."); stdout: the number of the first key that
                         resolves it according to bluetooth-data-tools, or -1.
"""
import sys

from bluetooth_data_tools import get_cipher_for_irk, resolve_private_address
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def address_hash(irk: bytes, prand: bytes) -> bytes:
    encryptor = Cipher(algorithms.AES(irk), modes.ECB()).encryptor()
    block = encryptor.update(bytes(13) + prand) + encryptor.finalize()
    return block[13:]


def main() -> None:
    lines = sys.stdin.read().split("\n")
    out = []
    if sys.argv[1] == "ah":
        for line in filter(None, lines):
            irk, prand = line.split()
            out.append(address_hash(bytes.fromhex(irk), bytes.fromhex(prand)).hex())
    else:
        ciphers = [get_cipher_for_irk(bytes.fromhex(key)) for key in lines[0].split()]
        for address in filter(None, lines[1:]):
            found = next((number for number, cipher in enumerate(ciphers) if resolve_private_address(cipher, address)), -1)
            out.append(str(found))
    sys.stdout.write("\n".join(out) + "\n")


main()
