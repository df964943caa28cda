#!/usr/bin/env bash
# Installs what building remat needs on a fresh Debian machine and nothing else:
# cmake and a C++ compiler (HiGHS is built from source by highs-sys) and libclang
# (bindgen generates the HiGHS bindings), and Chromium with its WebDriver for the page's
# browser test (tests/browser.rs). Idempotent: installs only what is missing.
# `--docker` adds what docker/smoke.sh needs: Debian's docker.io (dockerd) and debootstrap.
set -euo pipefail
missing=()
if [ "${1:-}" = "--docker" ]; then
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
  command -v curl >/dev/null 2>&1 || missing+=(curl)
fi
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
if ! ldconfig -p 2>/dev/null | grep -q 'libclang\(-[0-9.]*\)\?\.so'; then
  ls /usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || missing+=(libclang-dev)
fi
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium chromium-driver)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
