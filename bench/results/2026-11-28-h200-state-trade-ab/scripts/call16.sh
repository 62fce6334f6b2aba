# Device: main against branch next/host-state-first (the state trade) where part of the state is on the GPU, two rounds; then the branch's gpu_python.sh
make -C build-branch -j16 > /tmp/mk2.log 2>&1 || { tail -20 /tmp/mk2.log; exit 1; }
export VARIANTS="build:policies/optimizer-offload.umpol: build-branch:policies/optimizer-offload.umpol:"
export CELLS="16:16079074099 16:12116400537 32:18943364300" ROUNDS=2
sh build/gpu-run.sh ab
