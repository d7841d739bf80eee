#!/bin/sh
# bench/vs_kafka.py builds its C client (bench/c/rdkbench.c) against the librdkafka that the pinned
# confluent-kafka wheel ships; the headers come from Debian's librdkafka-dev (the C API is stable
# across 2.x). Installs them with apt-get when they are missing (as root, or through sudo).
set -eu
if [ -f /usr/include/librdkafka/rdkafka.h ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq librdkafka-dev >/dev/null
