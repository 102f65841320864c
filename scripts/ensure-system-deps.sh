#!/usr/bin/env bash
# What the tests need besides Node and npm: openssl and curl (signatures cross-checked, TLS calls) and Chromium
# (/usr/bin/chromium, driven by playwright-core: the console and the player's renderer). Runs before `npm test`
# (the "pretest" script). Installs the missing Debian packages when it can (as root, with apt-get); otherwise stops
# at once with the exact command to run.
set -euo pipefail
need=()
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "the tests need: ${need[*]} (Chromium at /usr/bin/chromium); this machine has no apt-get: install them with its package manager, then run npm test again" >&2
  exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "the tests need: ${need[*]}; install them with: sudo apt-get update && sudo apt-get install -y --no-install-recommends ${need[*]}" >&2
  exit 1
fi
echo "installing the Debian packages the tests need: ${need[*]} ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
echo "installed: ${need[*]}" >&2
