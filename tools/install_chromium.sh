#!/bin/sh
# The console test (tests/broker/test_console.py) drives the broker's web console in a real
# headless Chromium through Selenium and chromedriver (/usr/bin/chromium, /usr/bin/chromedriver);
# Debian ships both. Installs chromium, chromium-driver and a font for the page's text with
# apt-get when missing (as root, or through sudo; without the recommended desktop packages);
# does nothing otherwise.
set -eu
missing=""
for pkg in chromium chromium-driver fonts-liberation; do
    dpkg-query -W -f='${Status}\n' "$pkg" 2>/dev/null | grep -q '^install ok installed$' || missing="$missing $pkg"
done
if [ -z "$missing" ]; then
    exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq >/dev/null
# shellcheck disable=SC2086
$sudo env DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 apt-get install -y -qq --no-install-recommends $missing >/dev/null
