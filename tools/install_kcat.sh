#!/bin/sh
# kcat is one of the clients the conformance suite drives (tests/conformance); Debian ships it.
# Installs it with apt-get when it is missing (as root, or through sudo); does nothing otherwise.
set -eu
if command -v kcat >/dev/null 2>&1; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq kcat >/dev/null
