#!/bin/bash
# check-layers.sh - src/ is a stack: a file may use only what its own folder or a folder
# below it defines, so a change in an upper layer cannot break a lower one and a lower
# one can be tested without the layers above it.
#
#   core (0) < fabric (1) < conn (2) < xfer (3) < net (4)
#
# plugin/ and tools/ sit above all of them and are not checked. An upper layer that a
# lower one must reach (an async event reaching a link, a recovery asking for a replay)
# does it through a callback it registers, which this check cannot see and allows.
#
# The check reads the objects of the internal library (nm: what each defines, what
# each needs) rather than the sources, so macros and static inline helpers in headers
# are judged by what they really call. Objects whose source file no longer exists (a
# file moved to another folder, an old object left in the build tree) are skipped.
#
# It also checks the headers (a file or header includes only headers of its folder and
# below) and the error convention: below net, no ncclResult_t in code (a scan of
# src/core .. src/xfer), and nowhere in src/ a bare `return -1` (a negative errno says why).
#
# Usage: check-layers.sh BUILD_DIR [SOURCE_ROOT]
#   BUILD_DIR: the CMake build folder (its CMakeFiles/mcpnet_core.dir/src/<folder>/*.o);
#   SOURCE_ROOT defaults to the repository this script lives in.
# Prints one line per violation, e.g.
#   src/conn/mcp_conn_setup.c calls mcp_req_pool_init (xfer, above conn)
# and exits 1 when there is any.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:?usage: check-layers.sh BUILD_DIR [SOURCE_ROOT]}
root=${2:-$(dirname "$here")}
objdir=$build/CMakeFiles/mcpnet_core.dir/src
layers="core fabric conn xfer net"
# Known upward uses being removed elsewhere: "file symbol" and "file folder/header.h",
# one a line. Each must still occur (a stale entry fails the check too), so the lists
# only shrink. Empty: the stack holds.
allowed=""
allowed_includes=""

command -v nm >/dev/null || { echo "check-layers: nm (binutils) is needed"; exit 1; }
[ -d "$objdir" ] || { echo "check-layers: $objdir is missing: build the project first"; exit 1; }

rank() {
  local i=0 l
  for l in $layers; do
    [ "$l" = "$1" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo -1
}

# Every folder under src/ must have a place in the stack: a new one is a decision.
objs=()
for dir in "$root"/src/*/; do
  folder=$(basename "$dir")
  if [ "$(rank "$folder")" -lt 0 ]; then
    echo "check-layers: src/$folder is not in the stack ($layers): add it to $0"
    exit 1
  fi
done
while IFS= read -r -d '' o; do
  rel=${o#"$objdir"/}       # conn/mcp_conn_setup.c.o
  src=src/${rel%.o}
  [ -f "$root/$src" ] && objs+=("$o")
done < <(find "$objdir" -name '*.c.o' -print0 | sort -z)
nsrc=$(find "$root/src" -name '*.c' | wc -l)
if [ ${#objs[@]} -ne "$nsrc" ]; then
  echo "check-layers: $nsrc source files under src/ but ${#objs[@]} objects in $objdir: build first"
  exit 1
fi

# "folder file kind symbol": kind D (defined: T function, other data) or U (needed).
nm -o "${objs[@]}" | awk -v objdir="$objdir/" '
  {
    file = $1; sub(/:.*/, "", file); sub(objdir, "", file); sub(/\.o$/, "", file)
    folder = file; sub(/\/.*/, "", folder)
    if (NF == 3 && $2 == "U") print folder, "src/" file, "U", $3
    else if (NF == 3 && $2 ~ /^[TDBRCVW]$/) print folder, "src/" file, ($2 == "T" ? "F" : "D"), $3
    else if (NF == 4 && $3 ~ /^[TDBRCVW]$/) print folder, "src/" file, ($3 == "T" ? "F" : "D"), $4
  }' | awk -v layers="$layers" -v allowed="$allowed" '
  BEGIN {
    n = split(layers, l, " "); for (i = 1; i <= n; i++) rank[l[i]] = i
    na = split(allowed, a, "\n"); for (i = 1; i <= na; i++) if (a[i] != "") allow[a[i]] = 0
  }
  { rec[NR] = $0; if ($3 != "U") { owner[$4] = $1; isfn[$4] = ($3 == "F") } }
  END {
    bad = 0
    for (i = 1; i <= NR; i++) {
      split(rec[i], f, " ")
      if (f[3] != "U" || !(f[4] in owner)) continue
      if (rank[owner[f[4]]] > rank[f[1]]) {
        if ((f[2] " " f[4]) in allow) { allow[f[2] " " f[4]]++; continue }
        printf "%s %s %s (%s, above %s)\n", f[2], isfn[f[4]] ? "calls" : "uses", f[4], owner[f[4]], f[1]
        bad++
      }
    }
    for (k in allow)
      if (allow[k] == 0) {
        printf "check-layers: the allowed upward use \"%s\" no longer occurs: remove it from the list\n", k
        bad++
      }
    if (bad > 0) {
      printf "check-layers: %d problem(s); an upper layer is reached only through a callback it registers\n", bad
      exit 1
    }
  }'
# Headers: a header lives beside its code (src/<folder>/) and is included by its folder's
# name ("fabric/fabric_gid.h"), so the folder is the layer: a file (or a header) includes
# only headers of its folder and below. include/ holds only nccl/, our declarations of
# NCCL's ABI, which every layer may use.
# (No subshell per line: the check runs in the unit suite beside busy lab guests.)
declare -A lrank
i=0
for l in $layers; do lrank[$l]=$i; i=$((i + 1)); done
inc_bad=""
inc_seen=""
for h in "$root"/include/*; do
  [ "$(basename "$h")" = nccl ] || inc_bad+="include/$(basename "$h") is not public: headers live beside their code in src/<folder>/"$'\n'
done
while IFS= read -r line; do
  file=${line%%:*}
  hdr=${line#*#include \"}; hdr=${hdr%\"}
  folder=${file#src/}; folder=${folder%%/*}
  hf=${hdr%%/*}
  if [ ! -f "$root/src/$hdr" ]; then
    inc_bad+="$file includes $hdr, which is not a header under src/"$'\n'
  elif [ "${lrank[$hf]}" -gt "${lrank[$folder]}" ]; then
    if [[ $'\n'"$allowed_includes"$'\n' == *$'\n'"$file $hdr"$'\n'* ]]; then
      inc_seen+="$file $hdr"$'\n'
    else
      inc_bad+="$file includes $hdr ($hf, above $folder)"$'\n'
    fi
  fi
done < <(cd "$root" && grep -oE '#include "(core|fabric|conn|xfer|net)/[a-z_0-9]+\.h"' src/*/*.c src/*/*.h)
while IFS= read -r a; do
  [ -z "$a" ] || grep -qxF "$a" <<<"$inc_seen" ||
    inc_bad+="check-layers: the allowed upward include \"$a\" no longer occurs: remove it from the list"$'\n'
done <<<"$allowed_includes"
# A header of another folder is named with its folder: a bare "x.h" is the file's own
# (or one the build generates).
while IFS= read -r line; do
  file=${line%%:*}
  hdr=${line#*#include \"}; hdr=${hdr%\"}
  [ -f "$root/$(dirname "$file")/$hdr" ] || ! compgen -G "$root/src/*/$hdr" >/dev/null ||
    inc_bad+="$file includes \"$hdr\" without its folder"$'\n'
done < <(cd "$root" && grep -oE '#include "[a-z_0-9]+\.h"' src/*/*.c src/*/*.h)
if [ -n "$inc_bad" ]; then
  printf '%s' "$inc_bad"
  echo "check-layers: a header of an upper layer is included below it, or a header is out of place"
  exit 1
fi

# One error convention: below net a call returns 0 or a negative errno; only net (and
# plugin/) speak ncclResult_t. Code lines only: comments may name NCCL's results.
nccl_re='ncclResult_t|ncclSuccess|ncclSystemError|ncclInternalError|ncclInvalidArgument|ncclInvalidUsage|ncclRemoteError|ncclInProgress|ncclUnhandledCudaError'
spoken=$(cd "$root" && for f in src/core/*.c src/fabric/*.c src/conn/*.c src/xfer/*.c; do
  [ -f "$f" ] || continue
  sed -e 's://.*$::' -e 's:/\*.*\*/::g' "$f" | awk -v f="$f" -v re="$nccl_re" \
    '/^[ \t]*(\/\*|\*)/ { next } $0 ~ re { print f ":" NR " speaks ncclResult_t (only src/net/ and plugin/ do)" }'
done)
if [ -n "$spoken" ]; then
  echo "$spoken"
  echo "check-layers: return 0 or a negative errno (src/core/err.h); net maps it (mcp_net_result)"
  exit 1
fi
# -1 is -EPERM to a caller that reads it as an errno: a failure returns the errno that
# says what failed (-EINVAL, -ENOMEM, -EIO, -ENOENT for "none", ...).
minus_one=$(cd "$root" && grep -nE 'return[[:space:]]*\(?[[:space:]]*-1[[:space:]]*\)?[[:space:]]*;' src/*/*.c src/*/*.h || true)
if [ -n "$minus_one" ]; then
  echo "$minus_one" | sed 's/$/  <- return -1: return a negative errno (src\/core\/err.h)/'
  exit 1
fi
echo "check-layers: ${#objs[@]} objects in $layers order, no upward use; ncclResult_t only in net, no return -1"
