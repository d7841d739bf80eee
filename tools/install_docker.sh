#!/bin/sh
# The container tests (tests/container) build and run the kcompat image with a real Docker engine.
# Installs Debian's docker.io, docker-compose and debootstrap when missing (as root, or through
# sudo) and starts dockerd in the background when no engine answers; does nothing otherwise.
set -eu
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
missing=""
command -v dockerd >/dev/null 2>&1 || missing="$missing docker.io"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
command -v debootstrap >/dev/null 2>&1 || missing="$missing debootstrap"
if [ -n "$missing" ]; then
    $sudo apt-get update -qq >/dev/null
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi
if docker info >/dev/null 2>&1; then
    exit 0
fi
log="${TMPDIR:-/tmp}/kcompat-dockerd.log"
# --ip: ports a container publishes without an address (testcontainers' with_bind_ports) stay on loopback
$sudo sh -c "nohup setsid dockerd --ip=127.0.0.1 >'$log' 2>&1 &"
i=0
until docker info >/dev/null 2>&1; do
    i=$((i + 1))
    if [ "$i" -gt 120 ]; then
        echo "install_docker.sh: dockerd did not start; its log ($log):" >&2
        tail -n 30 "$log" >&2 || true
        exit 1
    fi
    sleep 0.5
done
