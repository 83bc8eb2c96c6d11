# Sourced by the bench/gpu_*.sh scripts on a GPU machine (repository root, wheels of
# bench/gather_wheels.sh carried in .whl/): NVLink multicast off (shared/HARDWARE.md: it can put
# the host's GPUs out of service), the carried wheels and the project installed, GPU named.
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 300 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
# z3's wheel (38 MB) does not fit the carry beside the tree: .whl/z3_site.tar.xz, where carried, holds its
# package (libz3.so once, no z3 binary: `unzip z3_solver-*.whl; rm z3/lib/libz3.so.5.4;
# tar cJf z3_site.tar.xz z3 z3_solver-*.dist-info`), unpacked beside the other wheels.
if [ -f .whl/z3_site.tar.xz ]; then tar xJf .whl/z3_site.tar.xz -C /tmp/site || exit 1; fi
timeout 300 python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
GPU=$(timeout 60 python3 -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())")
