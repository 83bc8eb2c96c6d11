#!/usr/bin/env bash
# On a GPU machine: which part of the verification worker's box (sandbox/) keeps CUDA from starting?
# (eval --apps on an H100, 2026-12-06: every boxed verification worker failed with "cudaGetDeviceCount()
# ... Error 304: OS call failed" while the app's own runs, boxed without the read-only file system,
# traced their kernels.) Each line: the variant, then CUDA's answer. Results under $OUT.
set -uo pipefail
source bench/gpu_setup.sh
OUT=${OUT:?}
CUDA='import torch; torch.cuda.init(); print("devices", torch.cuda.device_count(), torch.zeros(1, device="cuda").item())'
S=$(mktemp -d /tmp/boxprobe.XXXX)
box() {  # $1: name, $2: options JSON
  echo "== $1: $2" >> "$OUT/probe.txt"
  timeout 120 python3 -m swizzleperf.sandbox "$2" -- python3 -c "$CUDA" >> "$OUT/probe.txt" 2>&1
  echo "exit $?" >> "$OUT/probe.txt"
}
echo "== plain" >> "$OUT/probe.txt"; timeout 120 python3 -c "$CUDA" >> "$OUT/probe.txt" 2>&1
box old-pid-net '{"pid": true, "net": true, "drop_admin": true, "fs": "none", "writable": []}'
box mounts '{"pid": true, "net": true, "drop_admin": true, "fs": "mounts", "writable": ["'$S'"]}'
box mounts-no-net '{"pid": true, "net": false, "drop_admin": true, "fs": "mounts", "writable": ["'$S'"]}'
box mounts-admin '{"pid": true, "net": true, "drop_admin": false, "fs": "mounts", "writable": ["'$S'"]}'
box landlock '{"pid": false, "net": false, "drop_admin": true, "fs": "landlock", "writable": ["'$S'"]}'
box pid-only '{"pid": true, "net": false, "drop_admin": true, "fs": "none", "writable": []}'
for step in "mount -t tmpfs -o mode=1777 tmpfs /dev/shm" "mount -o remount,bind,ro /proc" "mount -o remount,bind,ro /dev" \
            "mount -o remount,bind,ro /sys" "mount -o remount,bind,ro /" "mount -o remount,bind,ro /tmp" "mount -o remount,bind,ro /run"; do
  echo "== unshare -m: $step" >> "$OUT/probe.txt"
  timeout 120 unshare -m --propagation private sh -c "$step && python3 -c '$CUDA'" >> "$OUT/probe.txt" 2>&1
  echo "exit $?" >> "$OUT/probe.txt"
done
timeout 120 python3 -c "from swizzleperf import sandbox; print('chosen', sandbox.filesystem_isolation())" >> "$OUT/probe.txt" 2>&1
cat /proc/self/mountinfo > "$OUT/mountinfo.txt"; ls -la /dev/ | grep -i nvidia > "$OUT/dev_nvidia.txt"; id > "$OUT/id.txt"
if command -v strace > /dev/null; then
  timeout 120 strace -f -e trace=%file,%network -o "$OUT/strace_mounts.txt" python3 -m swizzleperf.sandbox \
    '{"pid": true, "net": true, "drop_admin": true, "fs": "mounts", "writable": ["'$S'"]}' -- python3 -c "$CUDA" > /dev/null 2>&1
  grep -E "EROFS|EACCES|EPERM|ENOENT.*(nvidia|shm)" "$OUT/strace_mounts.txt" | tail -60 > "$OUT/strace_errors.txt"
else
  echo "no strace" > "$OUT/strace_errors.txt"
fi
