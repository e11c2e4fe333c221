#!/bin/sh
# tls_certs.sh DIR: make a throwaway PKI for the TLS tests and benchmarks in
# DIR (created; under the build or a temp folder, never committed), with
# openssl, in well under a second (EC P-256 keys):
#   ca.pem ca.key           a test certificate authority
#   server.pem server.key   a server certificate it signed, for 127.0.0.1,
#                           ::1 and localhost (what `stagger serve --tls-*`
#                           presents)
#   client.pem client.key   a client certificate it signed (mutual TLS)
#   other-ca.pem            an unrelated CA: trusting it verifies nothing
#   rogue.pem rogue.key     a client certificate other-ca signed (refused
#                           by a server that trusts ca.pem only)
#   capath/                 ca.pem under its subject hash (for --capath)
# Nothing here is secret: the keys exist for one test run. Prints nothing;
# exits nonzero when openssl fails.
set -eu
d=${1:?usage: tls_certs.sh DIR}
mkdir -p "$d" "$d/capath"
cd "$d"
umask 077
days=2
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

ca() { # ca NAME CN
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -sha256 -days $days -subj "/CN=$2" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$1.pem" 2>/dev/null
}

leaf() { # leaf NAME CN CA EXT
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$4" > "$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days $days \
    -sha256 -extfile "$1.ext" -out "$1.pem" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}

ca ca "stagger test CA"
ca other-ca "stagger unrelated CA"
leaf server 127.0.0.1 ca "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
leaf client "stagger test client" ca "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
leaf rogue "stagger rogue client" other-ca "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
cp ca.pem "capath/$(openssl x509 -in ca.pem -noout -subject_hash).0"
chmod 644 ./*.pem capath/*
