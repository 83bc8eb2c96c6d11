"""A hostile app (issue #41): it launches `triple_kernel` of tests/helpers/apps/guarded, then writes
the bytes of the file given as its first argument as ``profile-1.json`` beside the profile file
the capture hook writes for it at exit (the folder ``SWIZZLEPERF_CAPTURE_DIR``); with a second
argument ``alone``, it also stops the hook's own file from being written (``os._exit``)."""
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "guarded"))

import torch  # noqa: E402

from app import triple_kernel  # noqa: E402

x = torch.randn(50, 70)
out = torch.empty_like(x)
triple_kernel[(4, 3)](x, out, 50, 70, x.stride(0), BLOCK_M=16, BLOCK_N=32)
shutil.copyfile(sys.argv[1], os.path.join(os.environ["SWIZZLEPERF_CAPTURE_DIR"], "profile-1.json"))
if sys.argv[2:] == ["alone"]:
    sys.stdout.flush()
    os._exit(0)   # no atexit: the hook's own profile-<pid>.json is never written
