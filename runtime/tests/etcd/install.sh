#!/usr/bin/env bash
# Installs what the controllers' etcd store needs: etcd itself (Debian's etcd-server, started by
# the tests and by `isr cluster --etcd`), etcdctl (Debian's etcd-client, with which tests write
# keys of their own), and protoc with the protobuf well-known types, which the etcd-client
# crate's build compiles its gRPC stubs with. Idempotent: each is installed only
# if absent, so CI may call it on every run at little cost.
set -euo pipefail

missing=()
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
command -v etcdctl >/dev/null 2>&1 || missing+=(etcd-client)
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler)
[ -f /usr/include/google/protobuf/descriptor.proto ] || missing+=(libprotobuf-dev)

if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi

echo "etcd: $(etcd --version 2>/dev/null | head -1) | $(protoc --version)"
