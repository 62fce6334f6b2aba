# Local prep (run here, from /work/main on main): build-branch = this build with the
# Python package of branch next/host-state-first (the change is Python only).
set -e
rm -rf build-branch && cp -a build build-branch && rm -rf build-branch/wheels build-branch/python
mkdir -p build-branch/pyb && git archive next/host-state-first python | tar -x -C build-branch/pyb
ln -s pyb/python build-branch/python
make -C build-branch clean > /dev/null; git rev-parse --short next/host-state-first > build-branch/.commit
echo "then: make -C build clean; git rev-parse --short HEAD > build/.commit; hide old results; run build/call16.sh with carry build, build-branch, ..."
