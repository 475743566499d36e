#!/usr/bin/env bash
# train_gpt on token shards keeps its memory whatever the set's size: a few steps on a 2 GB
# nanoGPT-layout set (real bytes written to disk, not a sparse file) peak within 32 MB of the
# same run on a 10 MB set (peak resident size from /usr/bin/time, the kernel's VmHWM), the whole
# set read once at open for its checksum included. The sets live in the scratch directory and
# are removed at exit.
#   train_gpt_memory_is_flat_on_shards.sh BUILD_DIR SOURCE_DIR
source "$(dirname "$0")/../in_scratch_directory.sh" "$@"
free_kb=$(df -Pk . | awk 'NR == 2 { print $4 }')
if [ "$free_kb" -lt 3000000 ]; then
  echo "skipped: $((free_kb / 1024)) MB free in $scratch, the 2 GB set needs 3 GB"
  exit 77
fi
[ -x /usr/bin/time ] || { echo "skipped: no /usr/bin/time"; exit 77; }

# Byte tokens as little-endian uint16: each character followed by a zero byte (yes's newline
# becomes the zero after the last one).
# (yes and tr end on SIGPIPE when head has its bytes: not a failure.)
tokens() (
  set +o pipefail
  yes 'tXhXeX XqXuXiXcXkX XbXrXoXwXnX XfXoXxX XjXuXmXpXsX XoXvXeXrX XtXhXeX XlXaXzXyX XdXoXg' | tr 'X\n' '\0\0' | head -c "$1"
)
mkdir big small
tokens 2000000000 >big/train.bin
tokens 10000000 >small/train.bin
tokens 65536 >big/val.bin
cp big/val.bin small/val.bin
[ "$(stat -c %s big/train.bin)" -eq 2000000000 ] && [ "$(du -k big/train.bin | cut -f1)" -ge 1900000 ] ||
  fail "the 2 GB set is not 2 GB on disk: $(stat -c %s big/train.bin) bytes, $(du -k big/train.bin | cut -f1) KB used"

peak_kb() {  # peak_kb DIR: the run's peak resident KB
  /usr/bin/time -f '%M' -o "$1.peak" "$build/tools/train_gpt" --data "$1" --shard-format nanogpt --tokenizer byte --layers 1 --d-model 32 \
    --heads 2 --block-size 64 --batch 8 --steps 20 --eval-every 10 --eval-windows 8 --quiet --save "$1.st" \
    --log "$1.jsonl" --plot "$1.svg" >"$1.out" 2>&1 || fail "train_gpt --data $1 failed: $(cat "$1.out")"
  tail -1 "$1.peak"
}
small_kb=$(peak_kb small)
big_kb=$(peak_kb big)
grep -q "train 1 file (nanoGPT), 1000000000 tokens" big.out || fail "the 2 GB set's data line: $(grep '^data' big.out)"
echo "peak resident: $big_kb KB on 2 GB of shards, $small_kb KB on 10 MB"
[ $((big_kb - small_kb)) -le 32768 ] || fail "the 2 GB set took $((big_kb - small_kb)) KB more than the 10 MB one"
rm -rf big small
finish
