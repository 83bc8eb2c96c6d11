# Sourced by the bench/gpu_*.sh scripts on a GPU machine (repository root, wheels of
# bench/gather_wheels.sh carried in .whl/): NVLink multicast off (shared/HARDWARE.md: it can put
# the host's GPUs out of service), the carried wheels and the project installed, GPU named.
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
timeout 300 python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
timeout 300 python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . || exit 1
GPU=$(timeout 60 python3 -c "import torch; print(torch.cuda.get_device_name().split()[1].lower())")
