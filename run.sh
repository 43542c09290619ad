#!/usr/bin/env bash
# One command to set up and run: `./run.sh demo` or `./run.sh test` (extra arguments go to
# the demo or to pytest). Set-up happens on first use and whenever setup.py changes:
# Debian's libusb (open3d needs it), EGL and Mesa (the demo's contact pictures render
# offscreen with MuJoCo, MUJOCO_GL=egl; without them the demo runs and says why it drew no
# picture), a Python 3.11 venv in .venv, and this package with the ROS 2 wheels from PyPI
# (`pip install -e .[ros,test]`).
set -euo pipefail
cd "$(dirname "$0")"

setup() {
    if ! ldconfig -p 2>/dev/null | grep -q 'libusb-1.0.so.0'; then
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && apt-get install -y -qq libusb-1.0-0 >/dev/null
        else
            echo "run.sh: open3d needs libusb-1.0-0: sudo apt-get install libusb-1.0-0" >&2
            exit 1
        fi
    fi
    if ! ldconfig -p 2>/dev/null | grep -q 'libEGL_mesa.so.0' \
            || ! ldconfig -p 2>/dev/null | grep -q 'libGL.so.1'; then
        if [ "$(id -u)" = 0 ]; then
            apt-get update -qq && apt-get install -y -qq libegl1 libegl-mesa0 libgl1 \
                libgl1-mesa-dri >/dev/null
        else
            echo "run.sh: the demo's pictures need EGL: sudo apt-get install libegl1" \
                 "libegl-mesa0 libgl1 libgl1-mesa-dri (the demo runs without them)" >&2
        fi
    fi
    local python=${PYTHON:-$(command -v python3.11 || command -v python3)}
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    local stamp=.venv/.contact_estimation-setup
    local wanted
    wanted=$(cat setup.py setup.cfg | sha1sum)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
        .venv/bin/python -m pip install -q --upgrade pip >/dev/null
        .venv/bin/python -m pip install -q -e '.[ros,test]'
        echo "$wanted" > "$stamp"
    fi
}

command=${1:-}
shift || true
case "$command" in
    demo) setup; exec .venv/bin/python -m contact_estimation demo "$@" ;;
    test) setup; exec .venv/bin/python -m pytest "$@" ;;
    setup) setup ;;
    *) echo "usage: ./run.sh demo|test|setup [args...]" >&2; exit 2 ;;
esac
