#!/usr/bin/env bash
# Makes the certificates the tests and the demo use, with the openssl command line.
# Output: Sources/SessionKitTestSupport/Certificates/ (committed; run again to renew them).
#   root-ca.pem/.key       a test root CA (never trusted by the system)
#   localhost.pem/.key     a leaf for localhost and 127.0.0.1, signed by the root
#   localhost-chain.pem    the leaf followed by the root
#   expired / not-yet-valid leaves and the *-chain.pem files the live TLS tests serve (see the end)
#   client-*               client identities for mutual TLS (see the end)
#   weak-*                 leaves a careful client refuses though they chain to the root (see the end)
# `make-test-certificates.sh served` makes only the served chains again, keeping the CAs and leaves above;
# `make-test-certificates.sh clients` only the client identities; `make-test-certificates.sh weak` only the weak leaves.
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/Sources/SessionKitTestSupport/Certificates"
mkdir -p "$out"
cd "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "${1:-all}" = all ]; then

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
  -subj "/CN=SessionKit Test Root CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout root-ca.key -out root-ca.pem

openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" -keyout localhost.key -out "$tmp/localhost.csr"
cat > "$tmp/leaf.ext" <<'EXT'
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1
EXT
openssl x509 -req -in "$tmp/localhost.csr" -CA root-ca.pem -CAkey root-ca.key -CAcreateserial \
  -days 3650 -sha256 -extfile "$tmp/leaf.ext" -out localhost.pem
rm -f root-ca.srl
cat localhost.pem root-ca.pem > localhost-chain.pem
echo "certificates written to $out"

# The set for SecurityPolicy's evaluation tests (Security/): an intermediate CA under the root, leaves under it
# for localhost/127.0.0.1, a wrong host and a wildcard; a self-signed leaf; a second, untrusted root and a leaf
# under it. Expiry is tested by evaluating at another date.
cat > "$tmp/ca.ext" <<'EXT'
basicConstraints=critical,CA:TRUE,pathlen:0
keyUsage=critical,keyCertSign,cRLSign
EXT
openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=SessionKit Test Intermediate CA" -keyout intermediate-ca.key -out "$tmp/int.csr"
openssl x509 -req -in "$tmp/int.csr" -CA root-ca.pem -CAkey root-ca.key -CAcreateserial -days 3650 -sha256 \
  -extfile "$tmp/ca.ext" -out intermediate-ca.pem

leaf() { # name, subjectAltName, issuer-prefix
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=$1" -keyout "$1.key" -out "$tmp/$1.csr"
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' "$2" > "$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA "$3.pem" -CAkey "$3.key" -CAcreateserial -days 3650 -sha256 \
    -extfile "$tmp/$1.ext" -out "$1.pem"
}
leaf intermediate-localhost "DNS:localhost,IP:127.0.0.1" intermediate-ca
leaf wrong-host "DNS:wrong.example" intermediate-ca
leaf wildcard "DNS:*.example.test" intermediate-ca

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=localhost" \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout self-signed.key -out self-signed.pem

openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 -subj "/CN=SessionKit Untrusted Root" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
  -keyout untrusted-root.key -out untrusted-root.pem
leaf untrusted-leaf "DNS:localhost,IP:127.0.0.1" untrusted-root
rm -f ./*.srl
echo "evaluation certificates written"
fi

if [ "${1:-all}" = all ] || [ "${1:-all}" = served ]; then
# Leaves outside their validity period, for localhost/127.0.0.1 under the intermediate (`openssl ca` sets the dates).
mkdir -p "$tmp/ca"
dated_leaf() { # name, start, end (YYYYMMDDHHMMSSZ)
  : > "$tmp/ca/index.txt"
  echo 1000 > "$tmp/ca/serial"
  cat > "$tmp/ca.cnf" <<CNF
[ ca ]
default_ca = test
[ test ]
dir = $tmp/ca
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir
default_md = sha256
policy = anything
unique_subject = no
[ anything ]
commonName = supplied
[ leaf ]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = serverAuth
subjectAltName = DNS:localhost,IP:127.0.0.1
CNF
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=localhost" -keyout "$1.key" -out "$tmp/$1.csr"
  openssl ca -batch -notext -config "$tmp/ca.cnf" -cert intermediate-ca.pem -keyfile intermediate-ca.key \
    -extensions leaf -startdate "$2" -enddate "$3" -in "$tmp/$1.csr" -out "$1.pem"
}
dated_leaf expired 20200101000000Z 20210101000000Z
dated_leaf not-yet-valid 20400101000000Z 20410101000000Z

# What the live TLS tests serve: each leaf with its intermediate and root, and one without its intermediate.
for leaf in intermediate-localhost wrong-host expired not-yet-valid; do
  cat "$leaf.pem" intermediate-ca.pem root-ca.pem > "$leaf-chain.pem"
done
cat intermediate-localhost.pem root-ca.pem > missing-intermediate-chain.pem
cat untrusted-leaf.pem untrusted-root.pem > untrusted-leaf-chain.pem
cp self-signed.pem self-signed-chain.pem
echo "served chains written"
fi

if [ "${1:-all}" = all ] || [ "${1:-all}" = clients ]; then
# Client identities for mutual TLS (a server trusting root-ca.pem verifies them): alice under the root, as a PKCS#12
# with a password (her key and certificate, and the root); bob under the intermediate, as a PEM chain (his
# certificate, then the intermediate, which the server needs to reach the root) and a PEM key encrypted with a
# password (PKCS#8, AES-256).
client() { # name, issuer-prefix
  openssl req -newkey rsa:2048 -nodes -sha256 -subj "/CN=SessionKit Test Client $1" -keyout "$tmp/$1.key" \
    -out "$tmp/$1.csr"
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' \
    > "$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -days 3650 -sha256 \
    -extfile "$tmp/$1.ext" -out "client-$1.pem"
}
client alice root-ca
client bob intermediate-ca
rm -f ./*.srl
openssl pkcs12 -export -inkey "$tmp/alice.key" -in client-alice.pem -certfile root-ca.pem \
  -name "SessionKit Test Client alice" -passout pass:alice-secret -out client-alice.p12
cp "$tmp/alice.key" client-alice.key
cat client-bob.pem intermediate-ca.pem > client-bob-chain.pem
openssl pkcs8 -topk8 -v2 aes-256-cbc -in "$tmp/bob.key" -passout pass:bob-secret -out client-bob-encrypted.key
echo "client identities written"
fi

if [ "${1:-all}" = all ] || [ "${1:-all}" = weak ]; then
# Leaves for localhost/127.0.0.1 under the intermediate that OpenSSL's security level 2 refuses (a SHA-1 signature, an
# RSA key of 1024 bits), and one that names its host in the CN only (no subjectAltName: RFC 6125 6.4.4).
weak() { # name, key bits, digest, extensions
  openssl req -newkey "rsa:$2" -nodes -sha256 -subj "/CN=localhost" -keyout "$tmp/$1.key" -out "$tmp/$1.csr"
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n%s\n' \
    "$4" > "$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA intermediate-ca.pem -CAkey intermediate-ca.key -CAcreateserial -days 3650 \
    "-$3" -extfile "$tmp/$1.ext" -out "weak-$1.pem"
}
weak sha1 2048 sha1 "subjectAltName=DNS:localhost,IP:127.0.0.1"
weak rsa1024 1024 sha256 "subjectAltName=DNS:localhost,IP:127.0.0.1"
weak cn-only 2048 sha256 ""
rm -f ./*.srl
echo "weak leaves written"
fi
