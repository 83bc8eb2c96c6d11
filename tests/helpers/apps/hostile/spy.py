"""What a user's app can see of other processes (issue #41): every readable /proc/<pid>/environ,
its parent's included, searched for the text given as the first argument; the pids in /proc; and
a daemon in a session of its own that writes the second argument's file a second later."""
import json
import os
import subprocess
import sys

secret, late_file, report = sys.argv[1], sys.argv[2], sys.argv[3]
found, pids = [], sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
for pid in pids + [os.getppid()]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if secret.encode() in f.read():
                found.append(pid)
    except OSError:
        pass
subprocess.Popen(["/bin/sh", "-c", f"sleep 1; echo late > {late_file}"], start_new_session=True)
with open(report, "w") as f:
    json.dump({"found": found, "pids": pids, "ppid": os.getppid(), "pid": os.getpid()}, f)
