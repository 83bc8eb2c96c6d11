"""The bundled kernels (``kernels/*.py``, one ``KernelSpec`` each; ``distributed/``: the symmetric
heap and the multi-GPU kernels, one ``DistKernelSpec`` each; ``schedule/``: the GEMM schedule
under every GEMM), the contract a kernel module fulfils (``spec``: ``KernelSpec``) and the access
trace a kernel's hand-written model returns (``trace``: ``TileTrace``, what the simulator reads).

Imports only hwspecs: nothing of the sandbox, profiling or the agent.
"""
from swizzleperf.kernels.interpreter import interpreter_patches

# every interpreted launch of a kernel module of any process that imports one (kernels/interpreter.py)
interpreter_patches()
