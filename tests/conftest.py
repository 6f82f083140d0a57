"""Shared test setup: draw without a screen, close every figure a test made, and serve
JupyterLab through the README's `make lab` for the tests that need it; count the explicit
attention's calls."""

import os
import signal
import socket
import subprocess
import time
import urllib.request

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
from notebook_cells import ROOT, TOKEN


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


@pytest.fixture
def explicit_attention_calls(monkeypatch) -> list[int]:
    """A list that grows by one at every call of the course's explicit attention (the one that
    builds the weights); the fused kernel leaves it alone."""
    import utils.attention

    calls = []
    explicit = utils.attention.scaled_dot_product_attention
    monkeypatch.setattr(
        utils.attention,
        "scaled_dot_product_attention",
        lambda *args, **kwargs: calls.append(1) or explicit(*args, **kwargs),
    )
    return calls


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def lab_url(tmp_path_factory):
    """The address of a JupyterLab started with `make lab` on a free loopback port."""
    port = free_port()
    home = tmp_path_factory.mktemp("lab")
    settings = home / "settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text('{"autosave": false}')  # tests never write notebooks
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')  # no pop-up over the screenshots
    args = (
        f"--no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN} "
        f"--LabApp.user_settings_dir={home / 'settings'} --LabApp.workspaces_dir={home}"
    )
    log = home / "server.log"  # a file, not a pipe: a full pipe would block the server
    server = subprocess.Popen(
        ["make", "--no-print-directory", "lab", f"PORT={port}", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, so make and jupyter stop together
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if server.poll() is not None:
                pytest.fail(f"make lab exited with {server.returncode}:\n{log.read_text()}")
            try:
                urllib.request.urlopen(f"{url}/api/status?token={TOKEN}", timeout=5).close()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("JupyterLab did not answer within 90 s")
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
