"""Multi-GPU kernels on a symmetric heap (Iris-style, on PyTorch symmetric memory).

``heap`` is the host side (allocation, barrier, error checks), ``device`` the Triton device
functions (``translate``, ``load``, ``store``, ``get``, ``put``, ``atomic_*``, ``signal``,
``wait``); the kernel modules beside them each export a ``DistKernelSpec`` (``spec``), and
``load_spec(name)`` gives the spec of one of ``KERNELS`` by name. Like every kernel, imports only
kernels and hwspecs: the catalog and the splice of a tile order are the agent's
(bench/dist_bench.py's ``--order``).
"""

#: The distributed kernel modules beside this file, by name.
KERNELS = ("gemm_all_scatter", "all_gather_gemm", "gemm_reduce_scatter", "flash_decode")


def load_spec(name: str):
    """The ``SPEC`` (a ``DistKernelSpec``) of ``kernels/distributed/NAME.py`` for a name of
    ``KERNELS`` (imported by name: the caller picks the kernel).

    Raises:
        ValueError: a name not in ``KERNELS``.
    """
    import importlib
    if name not in KERNELS:
        raise ValueError(f"unknown distributed kernel {name!r}: known {', '.join(KERNELS)}")
    return importlib.import_module(f"{__name__}.{name}").SPEC
