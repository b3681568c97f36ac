#!/usr/bin/env python3
"""The name folding's outside reference: Python's unicodedata (the Unicode version of this
Python, 14.0.0 in Debian 12's python3.11), independent of the Unicode data files that
Scripts/generate-fold-table reads. Prints the fold of each line of FILE:

  fold_oracle.py FILE          lines of UTF-8 text in, their folds out
  fold_oracle.py --hex FILE    lines of hex-encoded UTF-8 in (so line separators, U+2028 and the
                               like pass through), hex-encoded folds out, or "-" for a line holding
                               a code point this Python's Unicode does not assign (category Cn)

The first line printed is this Python's Unicode version."""
import sys
import unicodedata


def D(t):
    return "".join(c for c in unicodedata.normalize("NFKD", t) if unicodedata.category(c) != "Mn")


def fold(s):
    return D(D(s).casefold())


def main():
    arguments = sys.argv[1:]
    hexadecimal = arguments[:1] == ["--hex"]
    if hexadecimal:
        arguments = arguments[1:]
    if len(arguments) != 1:
        sys.exit("usage: fold_oracle.py [--hex] FILE")
    out = []
    with open(arguments[0], "rb") as lines:
        for line in lines:
            line = line.rstrip(b"\n")
            if hexadecimal:
                text = bytes.fromhex(line.decode("ascii")).decode("utf-8")
                if any(unicodedata.category(c) == "Cn" for c in text):
                    out.append("-")
                else:
                    out.append(fold(text).encode("utf-8").hex())
            else:
                out.append(fold(line.decode("utf-8")))
    sys.stdout.buffer.write((unicodedata.unidata_version + "\n" + "".join(line + "\n" for line in out)).encode("utf-8"))


if __name__ == "__main__":
    main()
