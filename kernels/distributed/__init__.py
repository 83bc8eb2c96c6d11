"""Multi-GPU kernels on a symmetric heap (Iris-style, on PyTorch symmetric memory).

``heap`` is the host side (allocation, barrier, error checks), ``device`` the Triton device
functions (``translate``, ``load``, ``store``, ``get``, ``put``, ``atomic_*``, ``signal``,
``wait``); the kernel modules beside them each export a ``DistKernelSpec``.
"""
