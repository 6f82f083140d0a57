# The course's two front-door commands: `make lab` and `make test`.
# Both create .venv on first use; nothing else on the machine is changed.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
PORT   ?= 8888
# Jupyter refuses to run as root (containers, CI) unless told to.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)
LAB_ARGS ?=
NBVAL_FLAGS := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
# make test's pytest-xdist workers: one per core of the course's 2-core machines; each file runs in one
# worker (--dist loadfile), so a notebook's cells share one kernel, in order; the lessons are handed out
# first, so that the longest files start early (measured: 12 min 52 s against 14 min 38 s, tests first)
WORKERS ?= 2
# The installer: uv (https://docs.astral.sh/uv/) installs the same pins from requirements.txt about
# ten times faster than pip (measured: 6.6 s against 70 s for the runtime stack), so it is used when
# it is on PATH and pip has no configuration of its own: uv does not read pip.conf or PIP_* variables,
# so a machine that points pip at local wheels or another index keeps pip. INSTALLER=pip forces pip.
INSTALLER ?= $(if $(and $(shell command -v uv),$(if $(shell $(PYTHON) -m pip config list 2>/dev/null),,none)),uv,pip)
INSTALL = $(if $(filter uv,$(INSTALLER)),uv pip install --python $(BIN)/python,$(BIN)/python -m pip install)

.PHONY: lab lab-zh doctor learner-edition test test-peers test-lib test-kinds test-compat test-notebook lint format run-notebooks checkpoints experiments claims norm-order part-two exercises slides measure check-binder bench weights site clean

## make lab: set up .venv, copy the learner's edition (lessons/) into my-lessons/ (your copies: git ignores
## the folder, a copy is never overwritten, and it lists the lessons changed in the course since your
## copy; FORCE=1 backs yours up to my-lessons/backups/ and takes fresh ones), then open JupyterLab on lesson 1
lab: $(VENV)/.runtime
	$(BIN)/python tools/exercises.py my-lessons $(if $(filter-out 0,$(FORCE)),--force,--keep)
	$(BIN)/jupyter lab --port=$(PORT) --ServerApp.root_dir=. \
	  --LabApp.default_url=/lab/tree/my-lessons/01_patches.ipynb $(ROOT_FLAG) $(LAB_ARGS)

## make lab-zh: the same with the Chinese learner's edition (zh-CN/lessons/, made by tools/translation.py from the
## English lessons and translations/zh-CN/), your copies in my-lessons-zh/
lab-zh: $(VENV)/.runtime
	$(BIN)/python tools/exercises.py my-lessons-zh --edition zh-CN $(if $(filter-out 0,$(FORCE)),--force,--keep)
	$(BIN)/jupyter lab --port=$(PORT) --ServerApp.root_dir=. \
	  --LabApp.default_url=/lab/tree/my-lessons-zh/01_patches.ipynb $(ROOT_FLAG) $(LAB_ARGS)

## make doctor: check this set-up for the course, one line per check ([OK], [WARN], or [FAIL] with what to do):
## Python, requirements.txt's pins, torch's CPU build, the course library and its data files, the widgets' front
## end, threads and free memory, where it runs; exits 1 on a [FAIL]. In a lesson: import utils; utils.doctor()
doctor: $(VENV)/.runtime
	$(BIN)/python -m utils.doctor

## make test: set up .venv with the dev tools, lint, then every test: the library, each lesson once
## under nbval (lesson 6 with its full budgets in steps: the committed numbers are compared), the
## exercises, JupyterLab in a browser and the ViT-B/16 stand-in
test: lint $(VENV)/npm/.axe
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile -m "not peers" $(NBVAL_FLAGS) $(NOTEBOOKS) tests

## make test-peers: every ViT of timm's registry (its vision_transformer and deit modules, 179 models, 2 blocks
## each, random weights) loaded by from_timm: equal to timm's logits within 1e-5, or refused naming the feature;
## make test walks one model per distinct architecture but the giants (tests/test_timm_registry.py; about 18 minutes)
test-peers: $(VENV)/.dev
	$(BIN)/python -m pytest -p no:xdist -s -m peers tests/test_timm_registry.py

## make test-lib: the fast tier, the library's unit tests alone (under a minute): no kernel, no
## browser, no ViT-B/16 stand-in (the markers notebook, browser and slow in pyproject.toml)
test-lib: $(VENV)/.dev
	$(BIN)/python -m pytest tests -m "not notebook and not browser and not slow and not peers"

## make test-kinds: the tests that train and hold their result to shipped numbers (marker reproduction),
## once per emulated kind of CPU (tools/cpu_kinds.py: torch's, MKL's and oneDNN's code paths pinned lower),
## the kinds side by side; NB="notebooks/05_encoder.ipynb ..." runs those lessons under nbval instead
test-kinds: $(VENV)/.dev
	$(BIN)/python tools/cpu_kinds.py $(NB)

## make test-compat: the compatibility lane, every lesson and the library's tests on other versions than
## requirements.txt's (compat/latest.txt, the newest releases; compat/colab.txt, a Colab-like older stack,
## the lessons' Colab cell installing the course), one line per lesson; in .compat/ (about 30 minutes)
test-compat:
	$(PYTHON) tools/compat.py $(STACKS)

## make lint: ruff's rules and formatting on the library, the tests, the tools and the lessons
lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## make format: apply ruff's safe fixes and its formatting (then look at the diff)
format: $(VENV)/.dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## make test-notebook NB=notebooks/01_patches.ipynb: re-execute one notebook under nbval
test-notebook: $(VENV)/.dev
	$(BIN)/python -m pytest $(NBVAL_FLAGS) $(NB)

## make run-notebooks: Restart & Run All every notebook in place, with the full training budgets,
## and update the time and memory table (docs/time-and-memory.md) (about 10 minutes on 2 cores; commit the outputs)
## NB=notebooks/06_training.ipynb runs one
run-notebooks: $(VENV)/.dev
	$(BIN)/python tools/notebook_budget.py --write --page $(or $(NB),$(NOTEBOOKS))

## make checkpoints: retrain the tiny ViTs shipped in utils/checkpoints (reproducible on a CPU of the kind
## that made them); a run that differs from a shipped file stops without touching it, and FORCE=1 replaces
## it, keeping the old one as <name>.pt.bak
checkpoints: $(VENV)/.runtime
	$(BIN)/python tools/train_checkpoints.py $(if $(filter-out 0,$(FORCE)),--force)

## make experiments: run lesson 6's experiments with seeds 0-4 (one CPU thread per run, one run per
## core, about 30 minutes on 2 cores) into utils/results/lesson6.json, which the lesson and tests read
experiments: $(VENV)/.runtime
	$(BIN)/python tools/run_experiments.py

## make claims: run lesson 9's trials with seeds 0-4 (one CPU thread per run, one run per core, about an
## hour on 2 cores: 59 minutes here) into utils/results/lesson9.json, which the lesson and tests read
claims: $(VENV)/.runtime
	$(BIN)/python tools/run_experiments.py --suite claims

## make norm-order: run lesson 5's pre- vs post-norm arms with seeds 0-4 (12 arms, 60 runs of 300 steps, one
## CPU thread per run, one run per core, about 10 minutes on 2 cores) into utils/results/lesson5.json
norm-order: $(VENV)/.runtime
	$(BIN)/python tools/run_experiments.py --suite norm_order

## make part-two: run Part II's experiments with seeds 0-4 (lesson 11's 95 runs, --suite stability; lesson
## 12's 35, --suite resolution; lesson 13's 50, --suite mae; one CPU thread per run, one run per core, about
## 45 minutes on 2 cores) into utils/results/lesson11.json, lesson12.json and lesson13.json
part-two: $(VENV)/.runtime
	$(BIN)/python tools/run_experiments.py --suite stability
	$(BIN)/python tools/run_experiments.py --suite resolution
	$(BIN)/python tools/run_experiments.py --suite mae

## make exercises: copies of the learner's edition in exercises/ (for workshops); it never overwrites a
## copy that differs from a fresh one (a learner's answers): it stops and names them. FORCE=1 first moves
## those copies to exercises/backups/<date>_<time>/, then writes fresh ones
exercises: $(VENV)/.runtime
	$(BIN)/python tools/exercises.py exercises $(if $(filter-out 0,$(FORCE)),--force)

## make learner-edition: write lessons/ (the learner's edition: stubs, folded hints and solutions) from the
## solution edition in notebooks/; run it after changing a lesson (a test checks lessons/ is up to date)
learner-edition: $(VENV)/.runtime
	$(BIN)/python tools/learner_edition.py

## make site: the course as a website in _site/html/ (open index.html): the README as its home page, each
## lesson with its committed outputs (nothing is run), launch buttons at the release tag; then the Chinese
## edition in _site/html/zh-CN/, a language switch on every page; built and read offline (about 20 s).
## HUB=https://your.hub adds a JupyterHub button (nbgitpuller); SITE_DIR=... elsewhere
site: $(VENV)/.dev
	SITE_JUPYTERHUB="$(HUB)" $(BIN)/python -m sphinx -M html . $(or $(SITE_DIR),_site) -c docs/site -E -W --keep-going
	SITE_LANGUAGE=zh-CN SITE_JUPYTERHUB="$(HUB)" $(BIN)/python -m sphinx -b html . $(or $(SITE_DIR),_site)/html/zh-CN \
	  -d $(or $(SITE_DIR),_site)/doctrees-zh-CN -c docs/site -E -W --keep-going

## make slides: a slide deck per lesson for instructors in _slides/ (one self-contained HTML file each, from
## the solution edition's committed outputs; opens offline in any browser, arrow keys move; about 5 s)
slides: $(VENV)/.runtime
	$(BIN)/python tools/slides.py

## make measure: each lesson's wall time and kernel peak memory, full budgets, into docs/time-and-memory.md, without
## touching the notebooks; then every lesson inside a JupyterLab server, the server's memory added (fails
## if a lesson passes the budget: 800 MB for server and kernel together; about 15 minutes)
measure: $(VENV)/.dev
	$(BIN)/python tools/notebook_budget.py --page
	$(BIN)/python tools/binder_memory.py --page

## make check-binder: build a scratch venv from binder/ (torch from PyPI's CPU wheel instead of the
## +cpu index, which this check may not reach), run postBuild in it, then lesson 1 under nbval
check-binder:
	bash tools/check_binder.sh

## make weights: download the published ViT-B/16 (346 MB, once, online) for lesson 8 into
## ~/.cache/vit-from-scratch/weights/ (or $$VIT_WEIGHTS_DIR); nothing else ever downloads weights
weights: $(VENV)/.runtime
	$(BIN)/python -c "from utils.weights import download_vit_b16; print(download_vit_b16())"

## make bench: time the attention implementations, the tiny ViT's training, and the course's ViT against
## transformers' (docs/performance.md's tables)
bench: $(VENV)/.dev
	$(BIN)/python -m utils.bench
	$(BIN)/python tools/peer_bench.py

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || \
	  { echo "ViT from Scratch needs Python 3.11 (3.10+); found $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt pyproject.toml binder/overrides.json | $(BIN)/python
	$(INSTALL) -r requirements.txt -e .
	@mkdir -p $(VENV)/share/jupyter/lab/settings
	cp binder/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

$(VENV)/.dev: requirements-dev.txt requirements-timm.txt $(VENV)/.runtime
	$(INSTALL) -r requirements-dev.txt
	rm -rf $(VENV)/timm
	$(INSTALL) --no-deps --target $(VENV)/timm -r requirements-timm.txt
	@touch $@

# axe-core, from npm, for the site test's accessibility check (tests/test_site.py); without npm that
# check is skipped, except under CI, where .ci/run installs npm
AXE = axe-core@4.14.1
$(VENV)/npm/.axe: | $(BIN)/python
	@if command -v npm >/dev/null; then \
	  npm install --prefix $(VENV)/npm --no-save --no-audit --no-fund $(AXE) && touch $@; \
	else echo "npm not found: the site test's accessibility check is skipped (apt-get install -y npm)"; fi

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .compat _site
