"""A hostile app (issue #41): it launches `triple_kernel` of tests/helpers/apps/guarded, then
rewrites the launch file the capture hook wrote for it with the fields of the JSON file given as
its argument (``{"field": value}``; ``params.0.name`` reaches into lists and objects)."""
import glob
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "guarded"))

import torch  # noqa: E402

from app import triple_kernel  # noqa: E402

x = torch.randn(50, 70)
out = torch.empty_like(x)
triple_kernel[(4, 3)](x, out, 50, 70, x.stride(0), BLOCK_M=16, BLOCK_N=32)
with open(sys.argv[1]) as f:
    patch = json.load(f)
for path in glob.glob(os.path.join(os.environ["SWIZZLEPERF_CAPTURE_DIR"], "launch-*.json")):
    with open(path) as f:
        launch = json.load(f)
    for field, value in patch.items():
        *parents, last = field.split(".")
        place = launch
        for key in parents:
            place = place[int(key) if isinstance(place, list) else key]
        place[int(last) if isinstance(place, list) else last] = value
    with open(path, "w") as f:
        json.dump(launch, f)
print("rewrote", patch)
