# The device tool's prelude for GPU runs (bench/*.py, pytest -m gpu): installs the carried wheels
# (.whl/, carried with the run) that the machine lacks into /tmp/site and puts src/ on the path.
# Usage: source bench/gpu_prelude.sh
# The GPU tests (`pytest -m gpu tests`) take longer than one device call (over 15 minutes on an H200,
# 2026-11-29): run them in parts, each under `timeout -s INT` so that pytest, interrupted, still prints
# its failures and summary, e.g.
#   timeout -s INT 540 python3 -m pytest -m gpu tests/gpu -q -rfEs --durations=25 > $OUT/gpu.log 2>&1
mkdir -p /tmp/site
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD/src:$PWD/bench:$PWD
python3 -c "import torch, triton; print('versions: torch', torch.__version__, 'triton', triton.__version__)"
# Ray for `kernelpick tune --ray` (issue 25): .ray/ holds Ray's cp312 wheel unpacked without its Java,
# dashboard client and libraries (rllib, data, serve, train, tune), xz-compressed to fit the carry
# limit, and the wheels of what Ray needs that the image lacks (jsonschema and its own needs).
# To make it here (`echo /.ray/ >> .git/info/exclude` first), with the device tool's pip download
# flags (--no-deps --only-binary=:all: --python-version 3.12 --implementation cp --platform
# manylinux2014_x86_64 ...): download ray==2.60.0 into a scratch folder and unzip it; remove
# ray/jars ray/dashboard/client/build ray/rllib ray/data ray/serve ray/llm ray/train ray/tune ray/air;
# `tar -cf - ray ray-*.dist-info | xz -9 > .ray/ray-stripped.tar.xz` (79 MB wheel -> 20 MB); download
# jsonschema jsonschema-specifications referencing rpds-py into .ray/ the same way.
if [ -f .ray/ray-stripped.tar.xz ]; then
  tar -xJf .ray/ray-stripped.tar.xz -C /tmp/site
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .ray/*.whl
  python3 -c "import ray; print('ray', ray.__version__)"
fi
