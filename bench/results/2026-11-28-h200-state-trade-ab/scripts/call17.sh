# Device, tree = branch next/host-state-first: its gpu_python.sh (the state trade's GPU test among them),
# then main (build-main: main's Python package) against the branch (build) at the two tighter cells, one round
make -C build-main -j16 > /tmp/mk3.log 2>&1 || { tail -20 /tmp/mk3.log; exit 1; }
export VARIANTS="build-main:policies/optimizer-offload.umpol: build:policies/optimizer-offload.umpol:"
export CELLS="16:12116400537 32:18943364300" ROUNDS=1 PYTEST_S=340
sh build/gpu-run.sh ab pytests
