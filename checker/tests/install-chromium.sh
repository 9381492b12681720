#!/usr/bin/env bash
# Installs the real browser that the Explorer's browser test drives: Debian's chromium, run
# headless. Idempotent: installed only if absent, so CI may call it on every run at little cost.
set -euo pipefail

if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi "color emoji"; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then SUDO="sudo"; fi
    $SUDO apt-get update
    # A monospace and an emoji font, so that the Explorer's tables, diagrams and verdict icons
    # render (and screenshot) as they would on a desktop.
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
        chromium fonts-dejavu-core fonts-noto-color-emoji
fi

chromium --version 2>/dev/null
