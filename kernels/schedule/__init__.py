"""The GEMM schedule under every GEMM of the project (kernels/gemm.py and the distributed kernels'
per-rank GEMM): ``persistent_gemm`` holds the device functions (tensor-descriptor loads and
stores, the persistent tile loop's stream-K hand-over) and the host side of a launch;
``gemm_tuning`` chooses a configuration per shape by measurement and caches it. No kernel
module lives here (kernels/*.py are the bundled kernels, one KernelSpec each); like every kernel,
imports only kernels and hwspecs.
"""
