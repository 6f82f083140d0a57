#!/usr/bin/env bash
# Check binder/ without Docker: make a fresh venv from binder/requirements.txt, run binder/postBuild
# in it, check the JupyterLab settings landed, then run lesson 1 under nbval in that venv.
# torch comes from PyTorch's CPU index (the +cpu pin); where that index cannot be reached, pip's
# configured wheels or find-links must hold the same +cpu wheel, or the check fails loudly.
# Usage: bash tools/check_binder.sh   (PYTHON=python3.11 by default; the scratch venv in $SCRATCH)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-$(command -v python3.11 || command -v python3)}"
scratch="${SCRATCH:-$(mktemp -d)}"
want="$(sed 's/^python-//' binder/runtime.txt)"
have="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
[ "$want" = "$have" ] || { echo "binder/runtime.txt asks for Python $want; $python is $have"; exit 1; }

echo "== fresh venv in $scratch/venv from binder/requirements.txt"
"$python" -m venv "$scratch/venv"
export PATH="$scratch/venv/bin:$PATH"  # postBuild's `python` is the venv's, as in the Binder image
python -m pip install --quiet --retries 1 --timeout 30 -r binder/requirements.txt
python -c 'import torch; assert torch.__version__ == "2.13.0+cpu", torch.__version__; print("torch", torch.__version__)'

echo "== binder/postBuild"
bash binder/postBuild
python -c 'import utils, sys; assert utils.__file__.startswith(sys.argv[1]), utils.__file__' "$PWD"
cmp binder/overrides.json "$scratch/venv/share/jupyter/lab/settings/overrides.json"

echo "== lesson 1 under nbval in that venv"
python -m pip install --quiet $(grep -E '^(pytest|nbval)==' requirements-dev.txt)
python -m pytest -q -p no:cacheprovider --nbval --nbval-current-env \
  --nbval-sanitize-with tests/nbval_sanitize.cfg notebooks/01_patches.ipynb
echo "binder check passed"
