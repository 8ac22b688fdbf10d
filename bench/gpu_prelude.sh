# The device tool's prelude for GPU runs (bench/*.py, pytest -m gpu): installs the carried wheels
# (.whl/, carried with the run) that the machine lacks into /tmp/site and puts src/ on the path.
# Usage: source bench/gpu_prelude.sh
mkdir -p /tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench:$PWD
python3 -c "import torch, triton; print('versions: torch', torch.__version__, 'triton', triton.__version__)"
