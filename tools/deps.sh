#!/bin/sh
# Install the Debian packages a target needs, when they are missing.
# usage: tools/deps.sh build|test|bench|sanitize|fuzz
# Runs apt-get only when something is missing, and only as root.
set -e
want="gcc make libc6-dev libdnnl-dev zlib1g-dev libisal-dev"
case "$1" in
    test) want="$want clang libonnx-testdata python3 python3-numpy python3-onnx python3-torch python3-torchvision pkg-config chromium python3-jsonschema libopenblas0-pthread libopenmpi-dev openmpi-bin" ;;
    agree) want="$want python3 python3-numpy python3-onnx python3-torch python3-torchvision" ;;
    sanitize) want="$want clang-14 libclang-rt-14-dev libonnx-testdata python3 python3-numpy python3-onnx" ;;
    fuzz) want="$want clang-14 libclang-rt-14-dev" ;;
    bench) want="$want python3 python3-onnx python3-torch python3-torchvision nodejs npm libopenblas0-pthread libopenmpi-dev openmpi-bin" ;;
esac
missing=""
for p in $want; do
    # Node.js and npm count as present when their commands are: a machine
    # may carry another build of Node.js that bundles npm (and conflicts
    # with Debian's npm package)
    case "$p" in
        nodejs) command -v node >/dev/null 2>&1 && continue ;;
        npm) command -v npm >/dev/null 2>&1 && continue ;;
    esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "modelprof: missing Debian packages:$missing (run as root, or: apt-get install$missing)" >&2
    exit 1
fi
echo "modelprof: installing$missing" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
