#!/usr/bin/env bash
# Makes the certificates the TLS tests use, with openssl, into DIR (made fresh each run: nothing
# secret is kept in the repository):
#   ca.crt/ca.key            the test CA
#   server.crt/server.key    signed by the CA for localhost and 127.0.0.1, valid now
#   expired.crt/expired.key  signed by the CA for localhost, valid only in January 2020
#   other-ca.crt             another CA, which signed nothing the broker uses
#   client.crt/client.key    a client certificate signed by the CA (mutual TLS)
#   stranger.crt/.key        a client certificate signed by the other CA (refused)
#
#   Tests/Fixtures/make-test-certs.sh DIR
set -euo pipefail
dir="${1:?usage: make-test-certs.sh DIR}"
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "make-test-certs: failed: $*" >&2; "$@"; exit 1; }; }
for ca in ca other-ca; do
    quiet openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$ca.key" -out "$ca.crt" \
        -days 30 -subj "/CN=Locus test $ca"
done
sign() { # sign NAME SUBJECT CA EXTENSIONS [openssl ca dates...]
    local name="$1" subject="$2" ca="$3" extensions="$4"; shift 4
    quiet openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subject"
    printf '%s\n' "$extensions" > "$name.ext"
    if [ $# -gt 0 ]; then
        # Dates in the past need `openssl ca` (x509 -req only counts days from now).
        rm -rf "ca-db-$name"; mkdir -p "ca-db-$name"; : > "ca-db-$name/index.txt"; echo 1000 > "ca-db-$name/serial"
        cat > "ca-db-$name/ca.cnf" <<CNF
[ ca ]
default_ca = test
[ test ]
database = ca-db-$name/index.txt
serial = ca-db-$name/serial
new_certs_dir = ca-db-$name
default_md = sha256
policy = anything
copy_extensions = none
[ anything ]
commonName = supplied
CNF
        quiet openssl ca -batch -config "ca-db-$name/ca.cnf" -cert "$ca.crt" -keyfile "$ca.key" -in "$name.csr" -out "$name.crt" \
            -extfile "$name.ext" "$@"
    else
        quiet openssl x509 -req -in "$name.csr" -CA "$ca.crt" -CAkey "$ca.key" -CAcreateserial -out "$name.crt" -days 30 -extfile "$name.ext"
    fi
}
sign server "/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1"
sign expired "/CN=localhost" ca "subjectAltName=DNS:localhost,IP:127.0.0.1" -startdate 20200101000000Z -enddate 20200131000000Z
sign client "/CN=locus-gateway" ca "extendedKeyUsage=clientAuth"
sign stranger "/CN=someone-else" other-ca "extendedKeyUsage=clientAuth"
# The broker runs as its own user when started by root: it must read its files.
chmod 755 .
chmod 644 ./*.key ./*.crt
