#!/bin/bash
# cudaup on a real GPU machine, in one go: doctor (NVML), compat with the machine's driver,
# a kernel (half precision, cooperative groups, Thrust) compiled through `cudaup run` with
# the machine's toolkit and run, and `upgrade`'s GPU step.  Writes the driver's raw outputs
# to $OUT (fixtures for tests/data/driver).  Needs, beside the repository, the wheels of
# cudaup's dependencies the machine lacks in $WHEELS (default .devrun/):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 -d .devrun tomli-w platformdirs
set -u
export PYTHONUNBUFFERED=1
here=$(cd "$(dirname "$0")" && pwd)
wheels=${WHEELS:-.devrun}
OUT=${OUT:-/tmp/cudaup-gpu-out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheels"/*.whl || exit 9
export PYTHONPATH=/tmp/site:$PWD/src CUDAUP_HOME=/tmp/home CUDAUP_CACHE_DIR=/tmp/cache
step() { echo "== $*"; }
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
CUDA=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
step "toolkit at $CUDA; python $(python3 -c 'import sys; print(sys.executable, sys.version.split()[0])')"
nvidia-smi --query-gpu=driver_version,name,compute_cap,memory.total --format=csv,noheader > "$OUT/nvidia-smi-query.csv"
nvidia-smi > "$OUT/nvidia-smi-banner.txt"
cat /proc/driver/nvidia/version > "$OUT/proc-driver-nvidia-version.txt" 2>&1
cat /sys/module/nvidia/version > "$OUT/sys-module-nvidia-version.txt" 2>&1
step doctor --json; python3 -m cudaup doctor --json > "$OUT/doctor.json"; echo "exit $?"
step doctor; python3 -m cudaup doctor; echo "exit $?"
step compat; python3 -m cudaup compat --offline; echo "exit $?"
DRIVER=$(cut -d, -f1 "$OUT/nvidia-smi-query.csv" | head -1 | tr -d ' ')
step "compat 13.0.1 --driver $DRIVER"; python3 -m cudaup compat 13.0.1 --driver "$DRIVER" --offline; echo "exit $?"
step default; python3 -m cudaup default "$CUDA"; echo "exit $?"
step which; python3 -m cudaup which nvcc; echo "exit $?"
step "run nvcc"; python3 -m cudaup run "$CUDA" -- nvcc -O2 -arch=sm_90 -o /tmp/kernel "$here/kernel.cu"; echo "exit $?"
step kernel; /tmp/kernel; echo "exit $?"
step "upgrade gpu check"; python3 "$here/upgrade_gpu_check.py" "$(python3 -c 'import sys; print(sys.executable)')"; echo "exit $?"
