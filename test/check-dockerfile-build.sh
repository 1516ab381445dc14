#!/bin/bash
# check-dockerfile-build.sh - runs the build stage of examples/Dockerfile here, as the image
# build would (its RUN steps after the source is copied; the package installs are the
# image's business), with /src, /build and /pkg moved into a scratch folder. Then the .deb
# it leaves in /pkg is checked by check-examples.py --deb: the package the Dockerfile's
# runtime stage installs is one the project really builds, with the paths and tools the
# examples name. No container engine or registry is needed.
#   check-dockerfile-build.sh SOURCE_DIR [DOCKERFILE]
# DOCKERFILE (default SOURCE_DIR/examples/Dockerfile) lets a broken copy be tried.
set -euo pipefail
src=$(cd "${1:?usage: check-dockerfile-build.sh SOURCE_DIR}" && pwd)
dockerfile=${2:-$src/examples/Dockerfile}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The image's folders, moved here in one pass: /src is the source tree (only read), /build
# and /pkg scratch folders.
steps=$(python3 - "$dockerfile" "$src" "$work" <<'PY'
import re, sys
where = {"src": sys.argv[2], "build": sys.argv[3] + "/build", "pkg": sys.argv[3] + "/pkg"}
text = re.sub(r"\\\n", " ", open(sys.argv[1]).read())
stage, copied = 0, False
for line in text.splitlines():
    s = line.strip()
    if s.upper().startswith("FROM "):
        stage += 1
    if stage != 1:
        continue
    if re.match(r"COPY\s+\.\s+/src\b", s, re.I):
        copied = True
    elif s.upper().startswith("RUN ") and copied:
        print(re.sub(r"(?<![\w.-])/(src|build|pkg)\b", lambda m: where[m.group(1)], s[4:]))
if not copied:
    sys.exit("check-dockerfile-build: the build stage has no 'COPY . /src'")
PY
)
[ -n "$steps" ] || { echo "check-dockerfile-build: no RUN step after 'COPY . /src' in the build stage"; exit 1; }
echo "the Dockerfile's build stage, run here:"; echo "$steps"
bash -euo pipefail -c "$steps" > "$work/log" 2>&1 || { tail -n 30 "$work/log"; exit 1; }
n=$(ls "$work"/pkg/*.deb 2>/dev/null | wc -l)
[ "$n" = 1 ] || { echo "check-dockerfile-build: the build stage left $n .deb files in /pkg"; exit 1; }
python3 "$src/test/check-examples.py" "$src" "$work/build" --deb "$work/pkg"
