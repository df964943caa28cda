#!/usr/bin/env bash
# The Python wheel as a user gets it: maturin packs the `remat` binary with the Python package
# (pyproject.toml), the wheel goes into a fresh virtual environment, and the Python tests and
# README's quick start run against it with cargo and target/ out of reach: PATH holds neither
# cargo nor the environment's bin/, and the tests run from a copy outside the checkout, so the
# binary they use is the one `remat.Local()` finds beside the interpreter. Prints that binary.
#
#   bash scripts/wheel.sh [--profile dev|release] [--out DIR]
#
# `--profile dev` (CI's) reuses the dependencies `cargo test` built, HiGHS among them (same
# features: see the note in Cargo.toml); `release` is the wheel to hand out (HiGHS compiled again,
# 10-30 minutes on 2 cores). The environment reuses the interpreter's torch
# (`--system-site-packages`: torch is 1-3 GB; `bash scripts/deps.sh --python` pins it), and pip
# installs with `--no-index`, so nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
profile=dev
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 [--profile dev|release] [--out DIR]" >&2; exit 2 ;;
  esac
done
work=$(mktemp -d -t remat-wheel.XXXXXX)
trap 'rm -rf "$work"' EXIT
out="${out:-$work/dist}"
t0=$(date +%s)

# a wheel built earlier into --out must not be installed instead of this one
rm -f "$out"/remat-*.whl
maturin build --locked --profile "$profile" --out "$out" 2>&1 | tee "$work/build.log"
if grep -q "Compiling highs-sys" "$work/build.log"; then
  echo "wheel: HiGHS was compiled again for the wheel (features differ from cargo test's?)" >&2
fi
wheel=$(ls "$out"/remat-*.whl)
t1=$(date +%s)
echo "wheel: built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB, profile $profile) in $((t1 - t0)) s"
python3 -m zipfile -l "$wheel"

# without its own pip (and Python 3.11's bundled setuptools 65, which would shadow the
# setuptools>=77 torch requires): the interpreter's pip, seen through the system site-packages
python3 -m venv --system-site-packages --without-pip "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index "$wheel"
t2=$(date +%s)
echo "wheel: installed in a fresh venv in $((t2 - t1)) s"

# outside the checkout: the tests, their example and benchmark models and the bundled graphs they read
mkdir -p "$work/repo/python"
cp -r python/tests python/examples python/benchmarks "$work/repo/python/"
cp -r graphs README.md "$work/repo/"
find "$work/repo" -name __pycache__ -prune -exec rm -rf {} +
# no cargo, no REMAT_BIN, not even the environment's bin/ on PATH
clean=(env -u REMAT_BIN -u CARGO_TARGET_DIR PATH=/usr/bin:/bin)
if "${clean[@]}" sh -c 'command -v cargo' >/dev/null; then
  echo "wheel: cargo is in /usr/bin or /bin; the installed test would not be without it" >&2
  exit 1
fi
py="$work/venv/bin/python"
cd "$work/repo"
"${clean[@]}" "$py" -c 'import remat; print(f"wheel: remat {remat.__version__} from {remat.__file__}, binary {remat.Local().binary}")'
"${clean[@]}" "$work/venv/bin/remat" --version

# README's quick start (its first python block), as written there
"$py" - README.md >"$work/quickstart.py" <<'PY'
import re, sys
print(re.search(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S).group(1))
PY
t3=$(date +%s)
"${clean[@]}" "$py" "$work/quickstart.py"
t4=$(date +%s)
echo "wheel: README's quick start ran in $((t4 - t3)) s"

"${clean[@]}" "$py" -m pytest python/tests -p no:cacheprovider
echo "wheel: the Python tests passed against the installed wheel in $(($(date +%s) - t4)) s"
