# The README's two commands, and the site. Each sets everything up on a fresh machine (a venv with
# the package and every framework) and then does its job.
#   make run    the default CPU comparison: a `small` sweep, results and the report
#   make test   the test suite (what .ci/run calls)
#   make site   the observatory: one static site of everything the repository holds

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# wheels the Python 3.12/3.13 install test installs offline (tools/python_wheelhouse.sh)
WHEELS := $(VENV)/wheelhouse
# the history site's scripts and styles (tools/asv_site.py vendor)
ASSETS := $(VENV)/asv-www/.manifest-sha256
OUT    ?= out
# pytest-xdist workers for `make test`: CI has 2 cores; a file runs whole on one worker
# (--dist loadfile: its module fixtures, real sweeps, are built once), in the order
# tests/conftest.py gives (--no-loadscope-reorder: xdist would put the files with the
# most tests first, and the few-test minutes-long ones last)
TEST_WORKERS ?= 2

.PHONY: run test setup site

setup: $(STAMP) $(ASSETS)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[all,test]'
	rm -f $(VENV)/.installed-*
	touch $@

# The history site's scripts and styles (asv's page loads them from CDNs): pinned npm
# registry tarballs, fetched once with npm (tools/asv_site.py, docs/asv.md).
$(ASSETS): tools/asv_site_assets.json $(STAMP)
	$(PY) tools/asv_site.py vendor
	touch $@

# tinygrad's CPU device needs the clang binary (Debian's package; installed when missing,
# as root; otherwise the tinygrad row is unavailable, saying so).
# A sweep whose cells failed (exit 3: none measured, 4: some; harness/sweep/outcome.py)
# still gets its report; make then fails with the sweep's status.
run: $(STAMP)
	bash tools/ensure_clang.sh
	status=0; $(PY) -m harness run --size small --out $(OUT)/cpu-small.jsonl || status=$$?; \
	case $$status in 0|3|4) ;; *) exit $$status ;; esac; \
	$(PY) -m harness report $(OUT)/cpu-small.jsonl --out $(OUT)/report && exit $$status

# The observatory (docs/site.md) in $(OUT)/site from the committed records, release
# sweeps and docs; its history part is the asv site, which needs the vendored scripts.
site: $(STAMP) $(ASSETS)
	$(PY) -m harness site --out $(OUT)/site
	$(PY) -m harness.site.links $(OUT)/site

$(WHEELS)/.filled: $(STAMP) tools/python_wheelhouse.sh
	bash tools/python_wheelhouse.sh $(WHEELS)
	touch $@

# The report's and the history site's browser tests need Chromium (Debian's package;
# installed when missing). PyTensor's compile cache is pinned so every test process
# shares one cache.
test: $(STAMP) $(WHEELS)/.filled $(ASSETS)
	bash tools/ensure_chromium.sh
	bash tools/ensure_clang.sh
	PYTENSOR_FLAGS=base_compiledir=$$HOME/.cache/gradmem/pytensor $(PY) -m pytest \
	    -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=15
