#!/usr/bin/env bash
# The GPU checks, for a machine with CUDA and no service: the GPU tests, then one fold of each
# kind of loop on the GPU through `foldwise task check` (NCCL, one GPU per rank): the own-loop
# example (float16 autocast with a gradient scaler), the built-in loop at precision fp16 and 32,
# and the Lightning example at 16-mixed. Each prints its epochs and their times.
#   PYTHON=python3 scripts/gpu_checks.sh
# It needs foldwise's package names: installed, or, in a throw-away copy of the checkout, the
# source folders linked into foldwise/ (`for d in trainers optimizers service integrations
# migrations; do ln -s ../$d foldwise/$d; done`) and pydantic importable.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
# `foldwise task check` without an installed distribution (the CLI finds `task` by its entry
# point); a Typer app of one command runs it without its name
task_check() { "$PY" -c 'import sys; from foldwise.trainers.cli_task import task_app as app
sys.argv[0] = "foldwise task check"; app()' "$@"; }
status=0
run() { echo; echo "\$ $*"; "$@" || status=1; }

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$PY" -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
run "$PY" -m pytest -q -p no:cacheprovider tests/trainers/test_gpu.py
run task_check examples.tasks.shapes --device cuda --epochs 4 --metric val_f1 \
    --direction maximize --params '{"lr": 0.01}' --options '{"images": 2000, "workers": 2}'
for precision in fp16 32; do
  run task_check digits_mlp --device cuda --precision "$precision" --epochs 4 \
      --batch-size 64 --params '{"lr": 0.01, "width_1": 256, "depth": 2}'
done
run task_check examples.tasks.lightning_digits --device cuda --precision fp16 \
    --epochs 4 --metric val_acc --direction maximize
exit $status
