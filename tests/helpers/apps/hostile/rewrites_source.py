"""A hostile app (issue #41): it launches `triple_kernel` of the copy of tests/helpers/apps/guarded/app.py
given as its first argument, then appends to that file module-level code that any process importing
it runs: the generated module keeps it (an import and bare calls of other modules are the module's,
not the app's run), so an agent that imported the generated module to read its KernelSpec ran it.
The code touches ``<second argument>/imported-<pid>`` (``os.system``: a box that refuses the write
does not stop the import) and sets ``SWIZZLEPERF_HOSTILE_IMPORT`` in the importer's environment."""
import importlib.util
import sys

import torch

kernel_file, markers = sys.argv[1], sys.argv[2]
spec = importlib.util.spec_from_file_location("kernel", kernel_file)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
x = torch.randn(50, 70)
out = torch.empty_like(x)
module.triple_kernel[(4, 3)](x, out, 50, 70, x.stride(0), BLOCK_M=16, BLOCK_N=32)
with open(kernel_file, "a") as f:
    f.write("\nimport os as _hostile_os\n"
            f"_hostile_os.system('touch {markers}/imported-%d 2>/dev/null' % _hostile_os.getpid())\n"
            "_hostile_os.environ.setdefault('SWIZZLEPERF_HOSTILE_IMPORT', str(_hostile_os.getpid()))\n")
print("rewrote", kernel_file)
