#!/usr/bin/env bash
# Installs what building remat needs on a fresh Debian machine and nothing else:
# cmake and a C++ compiler (HiGHS is built from source by highs-sys) and libclang
# (bindgen generates the HiGHS bindings), and Chromium with its WebDriver for the page's
# browser test (tests/it/browser.rs). Idempotent: installs only what is missing.
# `--docker` adds what docker/smoke.sh needs: Debian's docker.io (dockerd) and debootstrap.
# `--python` adds what the Python package's tests need (python/): python3 and pip from Debian,
# then torch, torchvision, pytest, ruff, mypy and maturin (which builds the wheel: pyproject.toml,
# scripts/wheel.sh) from PyPI at pinned versions (about 3 GB of wheels, 1-2 minutes to install;
# CPU is enough).
set -euo pipefail
missing=()
if [ "${1:-}" = "--python" ]; then
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
fi
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

if [ "${1:-}" = "--python" ]; then
  pins=(torch==2.15.0 torchvision==0.29.2 pytest==9.2.0 ruff==0.17.6 mypy==2.4.1 maturin==1.16.0)
  if ! python3 - "${pins[@]}" <<'PY'
import sys
from importlib.metadata import PackageNotFoundError, version
try:
    ok = all(version(n).split("+")[0] == v for n, v in (p.split("==") for p in sys.argv[1:]))
except PackageNotFoundError:
    ok = False
sys.exit(0 if ok else 1)
PY
  then
    echo "installing: ${pins[*]}" >&2
    flags=()
    # Debian's python3 is "externally managed" (PEP 668): these are the machine's test tools
    python3 -c 'import sysconfig, os, sys; sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)' \
      && flags+=(--break-system-packages)
    python3 -m pip install -q "${flags[@]}" "${pins[@]}"
  fi
fi
