#!/usr/bin/env bash
# Makes the certificates the tests and the demo use, with the openssl command line.
# Output: Sources/SessionKitTestSupport/Certificates/ (committed; run again to renew them).
#   root-ca.pem/.key       a test root CA (never trusted by the system)
#   localhost.pem/.key     a leaf for localhost and 127.0.0.1, signed by the root
#   localhost-chain.pem    the leaf followed by the root
set -euo pipefail
out="$(cd "$(dirname "$0")/.." && pwd)/Sources/SessionKitTestSupport/Certificates"
mkdir -p "$out"
cd "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

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
