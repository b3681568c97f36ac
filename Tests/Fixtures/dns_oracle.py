#!/usr/bin/env python3
"""The resolver's outside reference: Python's ipaddress module reads addresses, and dnspython
(PyPI, pinned by Scripts/install-deps --test) writes the queries and answers that Locus's DNS code
is compared with. Prints JSON lines on standard output:

  {"kind": "address", "text": T, "packed": HEX or null, "compressed": TEXT or null}
  {"kind": "query", "name": N, "type": "A"|"AAAA", "id": I, "wire": HEX}
  {"kind": "answer", "id": I, "type": ..., "wire": HEX, "addresses": [HEX...], "ttls": [...], "error": null or NAME}

Deterministic: a fixed seed."""
import ipaddress
import json
import random
import sys

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdatatype
import dns.rrset

rng = random.Random(20261124)


def emit(**fields):
    print(json.dumps(fields))


def addresses():
    fixed = ["127.0.0.1", "0.0.0.0", "255.255.255.255", "1.2.3", "1.2.3.4.5", "01.2.3.4", "256.1.1.1", "1..2.3",
             "::", "::1", "1::", "fe80::1", "2001:db8::8:800:200c:417a", "2001:db8:0:0:1:0:0:1", "::ffff:192.0.2.1",
             "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1::2::3", ":1", "1:",
             "12345::", "g::", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "::1.2.3.4", "", "::ffff:1.2.3",
             "2001:DB8::A", "0:0:0:0:0:0:0:0", "1:0:0:2:0:0:0:3"]
    for text in fixed:
        emit_address(text)
    for _ in range(400):
        if rng.random() < 0.4:
            text = ".".join(str(rng.choice([0, 1, 9, 10, 99, 100, 199, 255, 256, rng.randrange(300)])) for _ in range(rng.choice([3, 4, 4, 4, 5])))
        else:
            groups = [format(rng.choice([0, 0, 0, 1, 0xffff, rng.randrange(0x10000)]), "x") for _ in range(8)]
            text = ipaddress.IPv6Address(":".join(groups)).compressed if rng.random() < 0.6 else ":".join(groups)
            if rng.random() < 0.1:
                text = text.upper()
        emit_address(text)


def emit_address(text):
    try:
        address = ipaddress.ip_address(text)
        emit(kind="address", text=text, packed=address.packed.hex(), compressed=address.compressed)
    except ValueError:
        emit(kind="address", text=text, packed=None, compressed=None)


def random_name():
    labels = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789-") for _ in range(rng.randint(1, 12))).strip("-") or "x"
              for _ in range(rng.randint(1, 4))]
    return ".".join(labels)


def queries():
    for name in ["broker.example", "mqtt.local.", "a", "x" * 63 + ".example"]:
        for rdtype in ["A", "AAAA"]:
            emit_query(name, rdtype)
    for _ in range(50):
        emit_query(random_name(), rng.choice(["A", "AAAA"]))


def emit_query(name, rdtype):
    query = dns.message.make_query(name, rdtype)
    query.id = rng.randrange(65536)
    emit(kind="query", name=name, type=rdtype, id=query.id, wire=query.to_wire().hex())


def answers():
    for case in range(200):
        rdtype = rng.choice(["A", "AAAA"])
        name = random_name()
        query = dns.message.make_query(name, rdtype)
        query.id = rng.randrange(65536)
        response = dns.message.make_response(query)
        error = None
        addresses, ttls = [], []
        roll = rng.random()
        if roll < 0.1:
            response.set_rcode(dns.rcode.NXDOMAIN)
            error = "nameNotFound"
        elif roll < 0.15:
            response.set_rcode(dns.rcode.SERVFAIL)
            error = "serverFailure"
        else:
            owner = dns.name.from_text(name)
            # A CNAME chain first, sometimes, as recursive servers answer.
            for _ in range(rng.choice([0, 0, 1, 2])):
                target = dns.name.from_text(random_name())
                response.answer.append(dns.rrset.from_text(owner, rng.randrange(1, 86400), "IN", "CNAME", target.to_text()))
                owner = target
            count = rng.choice([0, 1, 1, 2, 3])
            ttl = rng.randrange(0, 2**31)
            texts = []
            for _ in range(count):
                if rdtype == "A":
                    text = str(ipaddress.IPv4Address(rng.randrange(2**32)))
                else:
                    text = str(ipaddress.IPv6Address(rng.randrange(2**128)))
                if text not in texts:
                    texts.append(text)
            if texts:
                response.answer.append(dns.rrset.from_text_list(owner, ttl, "IN", rdtype, texts))
                addresses = [ipaddress.ip_address(t).packed.hex() for t in texts]
                ttls = [ttl] * len(texts)
            else:
                error = "noAddress"
            if rng.random() < 0.2:
                # An address of the other type in the additional section is not an answer.
                other = "AAAA" if rdtype == "A" else "A"
                value = "2001:db8::1" if other == "AAAA" else "192.0.2.1"
                response.additional.append(dns.rrset.from_text(owner, 60, "IN", other, value))
        if case % 37 == 5:
            response.flags |= dns.flags.TC
            error = "truncated"
        wire = response.to_wire()
        if addresses:
            # In the order the records are on the wire (an rrset is a set).
            parsed = dns.message.from_wire(wire)
            addresses = [ipaddress.ip_address(rdata.address).packed.hex()
                         for rrset in parsed.answer if rrset.rdtype == dns.rdatatype.from_text(rdtype) for rdata in rrset]
        emit(kind="answer", id=query.id, type=rdtype, name=name, wire=wire.hex(), addresses=addresses, ttls=ttls, error=error)


if __name__ == "__main__":
    addresses()
    queries()
    answers()
    sys.stdout.flush()
