"""The README's first command: `make lab` serves JupyterLab with lesson 1."""

import json
import urllib.request

import pytest
from notebook_cells import TOKEN

pytestmark = pytest.mark.browser  # a JupyterLab served by `make lab`


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


def test_lab_opens_on_the_learners_copy_of_lesson_1(lab_url):
    """make lab copies the learner's edition into my-lessons/ (git ignores it) and opens lesson 1 there."""
    with urllib.request.urlopen(f"{lab_url}/?token={TOKEN}", timeout=5) as response:
        assert response.status == 200
        assert response.url.split("?")[0].endswith("/lab/tree/my-lessons/01_patches.ipynb")
        assert b"JupyterLab" in response.read()


def test_lab_opens_the_lesson_as_a_notebook(lab_url):
    status, body = get(f"{lab_url}/api/contents/my-lessons/01_patches.ipynb?token={TOKEN}")
    notebook = json.loads(body)
    assert status == 200
    assert notebook["type"] == "notebook"
    assert notebook["content"]["metadata"]["vit_from_scratch"]["edition"] == "learner"
    assert notebook["content"]["metadata"]["kernelspec"]["name"] == "python3"


def test_lab_has_a_python_kernel_with_the_course_library(lab_url):
    status, body = get(f"{lab_url}/api/kernelspecs?token={TOKEN}")
    specs = json.loads(body)
    assert status == 200
    assert "python3" in specs["kernelspecs"]
