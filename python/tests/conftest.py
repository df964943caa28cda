import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

import remat

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))  # families.py

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


REPO = Path(__file__).resolve().parents[2]


def remat_binary() -> str:
    """$REMAT_BIN, else the workspace's target/debug/remat, else what `remat.Local()` finds (the
    binary the wheel installed beside this interpreter, else PATH)."""
    import os

    from remat.client import find_binary

    for candidate in (os.environ.get("REMAT_BIN"), str(REPO / "target/debug/remat")):
        if candidate and Path(candidate).is_file():
            return os.path.abspath(candidate)
    try:
        return find_binary()
    except remat.RematError as e:
        pytest.fail(f"{e} (or run `cargo build --locked`)")


def pytest_report_header() -> list[str]:
    """Which package and which binary this run tests (the checkout's, or an installed wheel's)."""
    try:
        binary = remat_binary()
    except pytest.fail.Exception as e:
        binary = f"none: {e}"
    return [f"remat {remat.__version__}: package {Path(remat.__file__).parent}, binary {binary}"]


@pytest.fixture(scope="session")
def binary() -> str:
    return remat_binary()


@contextmanager
def served(binary: str, *args: str) -> Iterator[str]:
    """A real `remat serve` (with `args`) on a free loopback port: its URL, stopped on leaving."""
    import socket
    import subprocess
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [binary, "serve", "--addr", f"127.0.0.1:{port}", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={"RUST_LOG": "warn", "PATH": "/usr/bin:/bin"},
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail("remat serve did not start")
            time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="session")
def server(binary: str) -> Iterator[str]:
    """A real `remat serve` on a free loopback port, stopped after the session."""
    with served(binary, "--workers", "2") as url:
        yield url
