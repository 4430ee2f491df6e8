#!/usr/bin/env bash
# The local node runs mover containers under runc when the tests run as
# root (it also switches users then). Installs runc from the distribution's
# packages when it is missing; without root nothing runs under runc, so
# nothing is installed.
set -euo pipefail

if command -v runc >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "[tools] runc: not installed, and not root: the local node will run movers as host processes without switching users; as root, 'make tools' installs runc" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[tools] runc is missing and this system has no apt-get: install runc with your package manager, then run make tools again" >&2
  exit 1
fi
echo "[tools] installing runc from the distribution's packages" >&2
if ! { apt-get install -y --no-install-recommends runc >/dev/null 2>&1 ||
       { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends runc >/dev/null 2>&1; }; }; then
  echo "[tools] could not install runc: run 'apt-get update && apt-get install -y runc' and then make tools again" >&2
  exit 1
fi
