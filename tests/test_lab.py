"""The README's first command: `make lab` serves JupyterLab with lesson 1."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "course-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


@pytest.fixture(scope="module")
def lab_url():
    port = free_port()
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so make and jupyter stop together
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"make lab exited with {server.returncode}:\n{server.stdout.read().decode()}")
            try:
                get(f"{url}/api/status?token={TOKEN}")
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 90 s")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_lab_opens_on_lesson_1(lab_url):
    with urllib.request.urlopen(f"{lab_url}/?token={TOKEN}", timeout=5) as response:
        assert response.status == 200
        assert response.url.split("?")[0].endswith("/lab/tree/notebooks/01_patches.ipynb")
        assert b"JupyterLab" in response.read()


def test_lab_opens_the_lesson_as_a_notebook(lab_url):
    status, body = get(f"{lab_url}/api/contents/notebooks/01_patches.ipynb?token={TOKEN}")
    notebook = json.loads(body)
    assert status == 200
    assert notebook["type"] == "notebook"
    assert notebook["content"]["metadata"]["kernelspec"]["name"] == "python3"


def test_lab_has_a_python_kernel_with_the_course_library(lab_url):
    status, body = get(f"{lab_url}/api/kernelspecs?token={TOKEN}")
    specs = json.loads(body)
    assert status == 200
    assert "python3" in specs["kernelspecs"]
