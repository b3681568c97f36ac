#!/usr/bin/env python3
"""Prints where a statically linked binary's bytes come from, from lld's link map (-Map=FILE):
the output sections, the contribution of each archive or Swift module, and the largest pieces.

    size-table.py LOCUS.map [TOP]

Only allocated sections count (what is in the file and in memory); debug sections are stripped."""
import re
import sys
from collections import defaultdict

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
sections = defaultdict(int)
origin_bytes = defaultdict(int)
pieces = []
current = None
line_re = re.compile(r"^\s*([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)\s+(\d+)\s(.*)$")
for line in open(path):
    match = line_re.match(line)
    if not match:
        continue
    vma, size, rest = int(match.group(1), 16), int(match.group(3), 16), match.group(5)
    if not rest.startswith(" "):
        current = rest.strip()
        if vma:
            sections[current] += size
        continue
    if current is None or not vma or rest.startswith("        ") and not rest.strip().startswith(("/", "<")):
        continue
    text = rest.strip()
    if not text.startswith(("/", "<")) or ":(" not in text:
        continue
    file_part, _, section = text.partition(":(")
    section = section[:-1]
    if "(" in file_part and file_part.endswith(")"):   # archive(member.o)
        archive = file_part[: file_part.index("(")].rsplit("/", 1)[-1]
        origin = archive
    elif ".build/" in file_part:                        # a Swift module's object
        origin = file_part.split("/")[-2].replace(".build", "") + " (Swift)"
    elif file_part.startswith("<"):
        origin = "linker-generated"
    else:
        origin = file_part.rsplit("/", 1)[-1]
    origin_bytes[origin] += size
    name = section.split(".", 2)[-1] if section.count(".") >= 2 else section
    pieces.append((size, origin, current, name))

total = sum(sections.values())
print(f"| output section | bytes |\n|---|---:|")
for name, size in sorted(sections.items(), key=lambda item: -item[1]):
    if size >= 1024:
        print(f"| {name} | {size:,} |")
print(f"| total allocated | {total:,} |\n")
print(f"| from | bytes | share |\n|---|---:|---:|")
for origin, size in sorted(origin_bytes.items(), key=lambda item: -item[1])[:top]:
    print(f"| {origin} | {size:,} | {100 * size / total:.1f} % |")
print(f"\n| largest pieces | from | section | bytes |\n|---|---|---|---:|")
for size, origin, section, name in sorted(pieces, reverse=True)[:top]:
    print(f"| `{name[:90]}` | {origin} | {section} | {size:,} |")
