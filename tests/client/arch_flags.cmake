# Run in script mode (cmake -DTREE=<release tree> -DCUDA_VERSION=<X.Y> -P arch_flags.cmake) with
# TORCH_CUDA_ARCH_LIST in the environment: PyTorch's own macro turns the list into nvcc's -gencode
# flags, as cmake/public/cuda.cmake calls it at configure time. Nothing here is PyTorch's: both files
# are included from the release's unpacked tree.
include(${TREE}/cmake/public/utils.cmake)
include(${TREE}/cmake/Modules_CUDA_fix/upstream/FindCUDA/select_compute_arch.cmake)
torch_cuda_get_nvcc_gencode_flag(flags)
message(STATUS "TORCH_GENCODE=${flags}")
