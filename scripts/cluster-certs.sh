#!/bin/sh
# cluster-certs.sh - makes the certificates of a rockstalk cluster's mutual
# TLS (src/net/tls.h) with the openssl command line tool, offline:
#
#   DIR/ca.pem, DIR/ca.key        a CA (EC P-256, 10 years): the trust
#                                 anchor every node is given
#   DIR/node<i>.pem, node<i>.key  for i in 1..N: node i's certificate (EC
#                                 P-256, 1 year or -d DAYS; signed by the
#                                 CA, which then lives as long), naming
#                                 the node as SAN DNS:rockstalk-node-<i> and
#                                 CN rockstalk-node-<i>, extendedKeyUsage
#                                 serverAuth,clientAuth (each node is
#                                 both the TLS server and client of others)
#
# Keys are mode 0600, certificates 0644. DIR is made if missing; a DIR that
# already has a ca.pem is refused unless -f is given (then everything is
# made anew: certificates from the old CA stop verifying; node files
# numbered above N are left as they are). Keep ca.key off the nodes. No
# network: openssl only generates and signs here.
set -eu

usage() {
    cat >&2 <<EOF
usage: $0 [-f] [-d DAYS] DIR N
  makes DIR/ca.pem, DIR/ca.key and DIR/node1.pem, node1.key .. nodeN.pem,
  nodeN.key for a cluster of N nodes (ids 1..N, N at most 65535)
  -f       overwrite the CA and certificates already in DIR
  -d DAYS  node certificates valid for DAYS days (default 365); the CA for
           3650 days or DAYS if longer
EOF
    exit 2
}

force=0
days=365
while getopts fd: opt; do
    case $opt in
    f) force=1 ;;
    d) days=$OPTARG ;;
    *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
dir=$1
n=$2
case $n in
'' | *[!0-9]* | 0*) usage ;;
esac
[ "$n" -le 65535 ] || usage
case $days in
'' | *[!0-9]* | 0*) usage ;;
esac
ca_days=3650
[ "$days" -le "$ca_days" ] || ca_days=$days
command -v openssl >/dev/null || {
    echo "$0: the openssl command is missing (Debian: openssl)" >&2
    exit 1
}
if [ -e "$dir/ca.pem" ] && [ "$force" -eq 0 ]; then
    echo "$0: $dir already has a ca.pem; not overwriting it (use -f)" >&2
    exit 1
fi
mkdir -p "$dir"

umask 077
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Our own configuration, so that the system's openssl.cnf adds nothing.
cat >"$tmp/openssl.cnf" <<'EOF'
[req]
distinguished_name = dn
prompt = no
[dn]
CN = rockstalk cluster CA
[ca]
basicConstraints = critical,CA:TRUE,pathlen:0
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[node]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = DNS:${ENV::NODE_NAME}
EOF
conf=$tmp/openssl.cnf
export NODE_NAME=unused # the config names it; set for every command

# Runs openssl quietly, showing what it said only when it fails.
ossl() {
    openssl "$@" 2>"$tmp/err" || {
        cat "$tmp/err" >&2
        exit 1
    }
}

key() {
    ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"
    chmod 600 "$1"
}

key "$dir/ca.key"
ossl req -config "$conf" -x509 -new -key "$dir/ca.key" -sha256 \
    -days "$ca_days" -extensions ca -set_serial "0x$(openssl rand -hex 16)" \
    -out "$dir/ca.pem"
chmod 644 "$dir/ca.pem"

i=1
while [ "$i" -le "$n" ]; do
    name=rockstalk-node-$i
    key "$dir/node$i.key"
    ossl req -config "$conf" -new -key "$dir/node$i.key" \
        -subj "/CN=$name" -out "$tmp/node.csr"
    NODE_NAME=$name
    ossl x509 -req -in "$tmp/node.csr" -sha256 \
        -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
        -set_serial "0x$(openssl rand -hex 16)" -days "$days" \
        -extfile "$conf" -extensions node -out "$dir/node$i.pem"
    chmod 644 "$dir/node$i.pem"
    i=$((i + 1))
done
echo "$dir: ca.pem, ca.key and $n node certificates (node1..node$n)"
