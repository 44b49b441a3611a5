#!/usr/bin/env bash
# exllamav3's built extension as carried parts, and back: stripped of debug symbols, xz-compressed, split into
# 15 MB parts named exl3-ext.part-*. scripts/stage_exl3_device.sh (EXT_PARTS=DIR) puts them in the first carry,
# and scripts/device_exl3.sh unpacks them onto the path, where exllamav3 imports the module instead of
# compiling it (about 5 minutes of device time). Packed by the device script after a compile there, or by
# scripts/build_exl3_ext.sh here.
#
#   scripts/exl3_ext_parts.sh pack SO OUTDIR [PYTHON]     exits 3 when the parts would pass 56 MB (too big to carry)
#   scripts/exl3_ext_parts.sh unpack DIR SO [PYTHON]
set -euo pipefail
USAGE="usage: scripts/exl3_ext_parts.sh pack SO OUTDIR [PYTHON] | unpack DIR SO [PYTHON]"
CMD=${1:?$USAGE}
PY=${4:-python3}
LIMIT=${EXL3_EXT_PARTS_LIMIT:-56000000}       # the carry left beside the first call's wheels and kit
PART=${EXL3_EXT_PART_BYTES:-15000000}
case $CMD in
pack)
    SO=${2:?$USAGE}; OUTDIR=${3:?$USAGE}
    TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
    strip --strip-debug -o "$TMP/ext.so" "$SO"
    "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(open(sys.argv[1], "rb"), lzma.open(sys.argv[2], "wb", preset=6))' \
        "$TMP/ext.so" "$TMP/ext.so.xz"
    SIZE=$(stat -c %s "$TMP/ext.so.xz")
    echo "exllamav3's extension: $(stat -c %s "$SO") bytes built, $SIZE stripped and compressed"
    [ "$SIZE" -le "$LIMIT" ] || { echo "$SO: $SIZE bytes compressed, over $LIMIT: too big to carry, not packed" >&2; exit 3; }
    mkdir -p "$OUTDIR" && rm -f "$OUTDIR"/exl3-ext.part-*
    split -b "$PART" "$TMP/ext.so.xz" "$OUTDIR/exl3-ext.part-"
    ;;
unpack)
    DIR=${2:?$USAGE}; SO=${3:?$USAGE}
    compgen -G "$DIR/exl3-ext.part-*" >/dev/null || { echo "$DIR: no exl3-ext.part-*" >&2; exit 1; }
    cat "$DIR"/exl3-ext.part-* | "$PY" -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' \
        >"$SO.tmp" && mv "$SO.tmp" "$SO"
    ;;
*) echo "$USAGE" >&2; exit 2 ;;
esac
