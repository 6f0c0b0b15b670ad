"""Logs written the way the real tools print them, for the triage and diagnosis tests.

Each `Case` is a log excerpt showing one known problem, in the exact shape of the tool that
prints it (MSVC and its `file(line): error Cxxxx:` lines, Ninja's `[n/m]` progress and FAILED
blocks, CMake Error blocks, nvcc, conda, pip, Python tracebacks). Most are copied in form from
the seed documents or from public bug reports named in build_config/diagnosis.toml;
`trigger` is part of the line the rule must report; no other rule may fire on the excerpt.

The CLEAN_LOGS are successful runs; no rule may fire on them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    text: str
    trigger: str  # a substring of the line the rule must report


PYTORCH_NINJA_PREFIX = r"""running build_deps
-- The CXX compiler identification is MSVC 19.11.25547.0
-- Check for working CXX compiler: C:/Program Files (x86)/Microsoft Visual Studio/2017/Community/VC/Tools/MSVC/14.11.25503/bin/Hostx64/x64/cl.exe -- works
-- Found CUDA: C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v9.0 (found version "9.0")
-- Build files have been written to: C:/pytorch/build
[1/4567] Building CXX object c10/CMakeFiles/c10.dir/util/Exception.cpp.obj
[2/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/torch/csrc/jit/error_report.cpp.obj
C:\pytorch\torch\csrc\jit\error_report.cpp(17): warning C4251: 'torch::jit::ErrorReport::context': class 'std::vector<torch::jit::Call,std::allocator<torch::jit::Call>>' needs to have dll-interface to be used by clients of struct 'torch::jit::ErrorReport'
"""

CASES: tuple[Case, ...] = (
    # ---------------------------------------------------------------- install
    Case(
        "python-32bit",
        "conda on 32-bit (seed 000)",
        r"""(base) C:\Users\dev>conda install pytorch -c pytorch
Fetching package metadata .............
Solving environment: failed

PackagesNotFoundError: The following packages are not available from current channels:

  - pytorch

Current channels:

  - https://conda.anaconda.org/pytorch/win-32
  - https://conda.anaconda.org/pytorch/noarch
  - https://repo.continuum.io/pkgs/main/win-32
  - https://repo.continuum.io/pkgs/main/noarch
  - https://repo.continuum.io/pkgs/free/win-32
  - https://repo.continuum.io/pkgs/free/noarch
  - https://repo.continuum.io/pkgs/r/win-32
  - https://repo.continuum.io/pkgs/msys2/win-32
""",
        "https://conda.anaconda.org/pytorch/win-32",
    ),
    Case(
        "python-32bit",
        "setup.py on a 32-bit Python",
        r"""C:\src\pytorch>python setup.py install
32-bit Windows Python runtime is not supported. Please switch to 64-bit Python.
""",
        "32-bit Windows Python runtime is not supported",
    ),
    Case(
        "conda-vc14-conflict",
        "UnsatisfiableError (seed 000)",
        r"""(base) C:\Users\dev>conda install -c pytorch pytorch
Solving environment: failed

UnsatisfiableError: The following specifications were found to be in conflict:
  - libxml2 -> libiconv -> *[track_features=vc14]
  - libxml2 -> libiconv -> vc==14
  - pytorch
Use "conda info <package>" to see the dependencies for each package.
""",
        "*[track_features=vc14]",
    ),
    Case(
        "download-truncated",
        "CondaError EOFError (seed 000)",
        r"""Downloading and Extracting Packages
pytorch-0.4.0        | 528.4 MB  | ################################################################ | 100%
CondaError: EOFError('Compressed file ended before the end-of-stream marker was reached',)
CondaError: EOFError('Compressed file ended before the end-of-stream marker was reached',)
""",
        "CondaError: EOFError('Compressed file ended",
    ),
    Case(
        "conda-http-000",
        "CondaHTTPError (seed 003)",
        r"""Proceed ([y]/n)? y

Downloading and Extracting Packages
pytorch-cpu-1.0.0    | 58.7 MB   |                                                                  |   0%

CondaHTTPError: HTTP 000 CONNECTION FAILED for url <https://conda.anaconda.org/pytorch/win-64/pytorch-cpu-1.0.0-py3.6_cpu_1.tar.bz2>
Elapsed: -

An HTTP error occurred when trying to retrieve this URL.
HTTP errors are often intermittent, and a simple retry will get you on your way.
""",
        "CondaHTTPError: HTTP 000 CONNECTION FAILED",
    ),
    Case(
        "clcache-pyuv",
        "pip install clcache on Python 3.13",
        r"""(venv) C:\src>pip install clcache
Collecting clcache
  Downloading clcache-4.2.0-py2.py3-none-any.whl (43 kB)
Collecting pyuv>=1.4.0 (from clcache)
  Downloading pyuv-1.4.0.tar.gz (1.6 MB)
  Preparing metadata (setup.py) ... done
Building wheels for collected packages: pyuv
  Building wheel for pyuv (setup.py) ... error
  error: subprocess-exited-with-error

  × python setup.py bdist_wheel did not run successfully.
  │ exit code: 1
  ╰─> [9 lines of output]
      running bdist_wheel
      running build
      running build_ext
      building 'pyuv._cpyuv' extension
      src/pyuv.c(156): warning C4013: 'PyEval_InitThreads' undefined; assuming extern returning int
      pyuv.obj : error LNK2001: unresolved external symbol PyEval_InitThreads
      build\lib.win-amd64-cpython-313\pyuv\_cpyuv.cp313-win_amd64.pyd : fatal error LNK1120: 1 unresolved externals
      error: command 'C:\\Program Files\\Microsoft Visual Studio\\2022\\BuildTools\\VC\\Tools\\MSVC\\14.38.33130\\bin\\HostX86\\x64\\link.exe' failed with exit code 1120
      [end of output]

  note: This error originates from a subprocess, and is likely not a problem with pip.
  ERROR: Failed building wheel for pyuv
  Running setup.py clean for pyuv
Failed to build pyuv
ERROR: Could not build wheels for pyuv, which is required to install pyproject.toml-based projects
""",
        "ERROR: Failed building wheel for pyuv",
    ),
    # ---------------------------------------------------------------- import
    Case(
        "no-module-torch",
        "ModuleNotFoundError (seed 000)",
        r"""C:\work>python train.py
Traceback (most recent call last):
  File "train.py", line 1, in <module>
    import torch
ModuleNotFoundError: No module named 'torch'
""",
        "ModuleNotFoundError: No module named 'torch'",
    ),
    Case(
        "no-module-torch",
        "ImportError as quoted in seed 003",
        r""">>> import torch
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
ImportError: No module named 'torch
""",
        "ImportError: No module named 'torch",
    ),
    Case(
        "torch-py-shadowing",
        "a torch.py next to the script",
        r"""C:\work>python train.py
Traceback (most recent call last):
  File "C:\work\train.py", line 2, in <module>
    from torch._C import _initExtension
ModuleNotFoundError: No module named 'torch._C'; 'torch' is not a package
""",
        "'torch' is not a package",
    ),
    Case(
        "torch-c-source-tree",
        "import torch inside the source folder (seed 000)",
        r"""C:\src\pytorch>python -c "import torch"
Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "C:\src\pytorch\torch\__init__.py", line 78, in <module>
    from torch._C import *
ModuleNotFoundError: No module named 'torch._C'
""",
        "No module named 'torch._C'",
    ),
    Case(
        "torch-c-source-tree",
        "recent PyTorch's own message",
        r"""Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "C:\src\pytorch\torch\__init__.py", line 451, in <module>
    raise ImportError(textwrap.dedent('''
ImportError: Failed to load PyTorch C extensions:
    It appears that PyTorch has loaded the `torch/_C` folder
    of the PyTorch repository rather than the C extensions which
    are expected in the `torch._C` namespace. This can occur when
    using the `install` workflow. e.g.
        $ python setup.py install && python -c "import torch"
""",
        "ImportError: Failed to load PyTorch C extensions:",
    ),
    Case(
        "dll-load-failed-missing-runtime",
        "DLL load failed (seed 000)",
        r"""Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
  File "C:\Anaconda3\lib\site-packages\torch\__init__.py", line 78, in <module>
    from torch._C import *
ImportError: DLL load failed: The specified module could not be found.
""",
        "ImportError: DLL load failed: The specified module could not be found.",
    ),
    Case(
        "dll-load-failed-missing-runtime",
        "WinError 126 on a CPU-only DLL",
        r"""Traceback (most recent call last):
  File "C:\work\train.py", line 1, in <module>
    import torch
  File "C:\Users\dev\miniconda3\envs\t\lib\site-packages\torch\__init__.py", line 129, in <module>
    raise err
OSError: [WinError 126] The specified module could not be found. Error loading "C:\Users\dev\miniconda3\envs\t\lib\site-packages\torch\lib\shm.dll" or one of its dependencies.
""",
        "[WinError 126]",
    ),
    Case(
        "dll-load-failed-missing-runtime",
        "Python 3.8+ wording",
        r"""  File "C:\Python311\Lib\site-packages\torch\__init__.py", line 262, in <module>
    from torch._C import *  # noqa: F403
ImportError: DLL load failed while importing _C: The specified module could not be found.
""",
        "DLL load failed while importing _C",
    ),
    Case(
        "dll-load-failed-cuda-without-gpu",
        "WinError 126 on caffe2_nvrtc.dll",
        r"""Traceback (most recent call last):
  File "X:\SD\ComfyUI\main.py", line 66, in <module>
    import comfy.utils
  File "X:\SD\ComfyUI\comfy\utils.py", line 1, in <module>
    import torch
  File "C:\Users\tenra\AppData\Roaming\Python\Python310\site-packages\torch\__init__.py", line 133, in <module>
    raise err
OSError: [WinError 126] The specified module could not be found. Error loading "C:\Users\tenra\AppData\Roaming\Python\Python310\site-packages\torch\lib\caffe2_nvrtc.dll" or one of its dependencies.
""",
        "caffe2_nvrtc.dll",
    ),
    Case(
        "dll-load-failed-cuda-without-gpu",
        "no NVIDIA driver",
        r"""  File "C:\Python311\Lib\site-packages\torch\cuda\__init__.py", line 302, in _lazy_init
    torch._C._cuda_init()
RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver from http://www.nvidia.com/Download/index.aspx
""",
        "Found no NVIDIA driver on your system",
    ),
    Case(
        "dll-load-failed-os-cannot-run",
        "intel-openmp from conda-forge (seed 001)",
        r"""Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
  File "C:\Users\dev\Anaconda3\envs\cf\lib\site-packages\torch\__init__.py", line 78, in <module>
    from torch._C import *
ImportError: DLL load failed: The operating system cannot run %1.
""",
        "The operating system cannot run %1",
    ),
    Case(
        "numpy-mismatch",
        "old NumPy (seed 003)",
        r"""RuntimeError: module compiled against API version 0xc but this version of numpy is 0xb
Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
  File "C:\Anaconda3\lib\site-packages\torch\__init__.py", line 80, in <module>
    from torch._C import *
ImportError: numpy.core.multiarray failed to import
""",
        "module compiled against API version 0xc",
    ),
    Case(
        "numpy-mismatch",
        "NumPy 2 with a module built against 1.x",
        r"""
A module that was compiled using NumPy 1.x cannot be run in
NumPy 2.1.3 as it may crash. To support both 1.x and 2.x
versions of NumPy, modules must be compiled with NumPy 2.0.
Some module may need to rebuild instead e.g. with 'pybind11>=2.12'.
""",
        "A module that was compiled using NumPy 1.x",
    ),
    # ---------------------------------------------------------------- runtime
    Case(
        "multiprocessing-freeze-support",
        "DataLoader workers without the guard (seed 000)",
        r"""Traceback (most recent call last):
  File "<string>", line 1, in <module>
  File "C:\Anaconda3\lib\multiprocessing\spawn.py", line 105, in spawn_main
    exitcode = _main(fd)
  File "C:\Anaconda3\lib\multiprocessing\spawn.py", line 114, in _main
    prepare(preparation_data)
  File "C:\Anaconda3\lib\multiprocessing\spawn.py", line 225, in prepare
    _fixup_main_from_path(data['init_main_from_path'])
  File "C:\Anaconda3\lib\multiprocessing\spawn.py", line 277, in _fixup_main_from_path
    run_name="__mp_main__")
  File "C:\Anaconda3\lib\site-packages\torch\utils\data\dataloader.py", line 289, in __init__
    w.start()
  File "C:\Anaconda3\lib\multiprocessing\spawn.py", line 143, in _check_not_importing_main
    is not going to be frozen to produce an executable.''')
RuntimeError:
        An attempt has been made to start a new process before the
        current process has finished its bootstrapping phase.

        This probably means that you are not using fork to start your
        child processes and you have forgotten to use the proper idiom
        in the main module:

            if __name__ == '__main__':
                freeze_support()
                ...
""",
        "An attempt has been made to start a new process before the",
    ),
    Case(
        "dataloader-broken-pipe",
        "worker died early (seed 000)",
        r"""Traceback (most recent call last):
  File "train.py", line 42, in <module>
    for i, (images, labels) in enumerate(train_loader):
  File "C:\Anaconda3\lib\site-packages\torch\utils\data\dataloader.py", line 501, in __iter__
    return _DataLoaderIter(self)
  File "C:\Anaconda3\lib\site-packages\torch\utils\data\dataloader.py", line 289, in __init__
    w.start()
  File "C:\Anaconda3\lib\multiprocessing\process.py", line 105, in start
    self._popen = self._Popen(self)
  File "C:\Anaconda3\lib\multiprocessing\context.py", line 223, in _Popen
    return _default_context.get_context().Process._Popen(process_obj)
  File "C:\Anaconda3\lib\multiprocessing\context.py", line 322, in _Popen
    return Popen(process_obj)
  File "C:\Anaconda3\lib\multiprocessing\popen_spawn_win32.py", line 65, in __init__
    reduction.dump(process_obj, to_child)
  File "C:\Anaconda3\lib\multiprocessing\reduction.py", line 60, in dump
    ForkingPickler(file, protocol).dump(obj)
BrokenPipeError: [Errno 32] Broken pipe
""",
        "BrokenPipeError: [Errno 32] Broken pipe",
    ),
    Case(
        "windows-error-1455",
        "shared file mapping (seed 000)",
        "Couldn\u2019t open shared file mapping: <torch_14808_1591070686>, error code: <1455> at D:\\Downloads\\pytorch-master-1\\torch\\lib\\TH\\THAllocator.c:154\n\n[windows] driver shut down\n",
        "error code: <1455>",
    ),
    Case(
        "windows-error-1455",
        "paging file too small while loading DLLs in workers",
        r"""  File "D:\anaconda3\envs\yolov5\lib\site-packages\torch\__init__.py", line 128, in <module>
    raise err
OSError: [WinError 1455] The paging file is too small for this operation to complete. Error loading "D:\anaconda3\envs\yolov5\lib\site-packages\torch\lib\cudnn_cnn_infer64_8.dll" or one of its dependencies.
""",
        "[WinError 1455]",
    ),
    Case(
        "cuda-ipc-unsupported",
        "THCudaCheck error=63 (seed 000)",
        r"""THCudaCheck FAIL file=torch\csrc\generic\StorageSharing.cpp line=252 error=63 : OS call failed or operation not supported on this OS
""",
        "error=63",
    ),
    Case(
        "no-kernel-image",
        "old GPU (seed 000)",
        r"""THCudaCheck FAIL file=torch\lib\thcunn\generic/Threshold.cu  line=34 error=48 : no kernel image is available for execution on the device
Traceback (most recent call last):
  File "test.py", line 5, in <module>
    y = torch.nn.functional.relu(x)
RuntimeError: cuda runtime error (48) : no kernel image is available for execution on the device at torch\lib\thcunn\generic/Threshold.cu:34
""",
        "error=48",
    ),
    Case(
        "no-kernel-image",
        "a current wheel on a Pascal GPU: the capability warning, then the CUDA error",
        r"""C:\Users\dev\miniconda3\envs\train\Lib\site-packages\torch\cuda\__init__.py:262: UserWarning:
NVIDIA GeForce GTX 1060 6GB with CUDA capability sm_61 is not compatible with the current PyTorch installation.
The current PyTorch install supports CUDA capabilities sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 compute_120.
If you want to use the NVIDIA GeForce GTX 1060 6GB GPU with PyTorch, please check the instructions at https://pytorch.org/get-started/locally/

  warnings.warn(
Traceback (most recent call last):
  File "C:\work\train.py", line 14, in <module>
    y = model(x.cuda())
        ^^^^^^^^^^^^^^^
RuntimeError: CUDA error: no kernel image is available for execution on the device
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
""",
        "with CUDA capability sm_61 is not compatible",
    ),
    Case(
        "cuda-driver-too-old",
        "CUDA initialization in a traceback (c10/cuda/CUDAFunctions.cpp)",
        r"""Traceback (most recent call last):
  File "C:\work\check.py", line 3, in <module>
    x = torch.zeros(1).cuda()
        ^^^^^^^^^^^^^^^^^^^^^
  File "C:\Users\dev\miniconda3\envs\build\Lib\site-packages\torch\cuda\__init__.py", line 372, in _lazy_init
    torch._C._cuda_init()
RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver.
""",
        "(found version 11040)",
    ),
    Case(
        "cuda-driver-too-old",
        "torch.cuda.is_available() warns and answers False",
        r""">>> import torch; torch.cuda.is_available()
C:\Users\dev\miniconda3\envs\build\Lib\site-packages\torch\cuda\__init__.py:174: UserWarning: CUDA initialization: The NVIDIA driver on your system is too old (found version 12020). Please update your GPU driver by downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. (Triggered internally at C:\actions-runner\_work\pytorch\pytorch\c10\cuda\CUDAFunctions.cpp:109.)
  return torch._C._cuda_getDeviceCount() > 0
False
""",
        "(found version 12020)",
    ),
    Case(
        "cuda-driver-insufficient",
        "THCudaCheck error=35 in an old PyTorch",
        r"""THCudaCheck FAIL file=..\aten\src\THC\THCGeneral.cpp line=74 error=35 : CUDA driver version is insufficient for CUDA runtime version
Traceback (most recent call last):
  File "train.py", line 20, in <module>
    model.cuda()
RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at ..\aten\src\THC\THCGeneral.cpp:74
""",
        "error=35",
    ),
    Case(
        "cuda-driver-insufficient",
        "CUDA sample deviceQuery",
        r"""deviceQuery.exe Starting...

 CUDA Device Query (Runtime API) version (CUDART static linking)

cudaGetDeviceCount returned 35
-> CUDA driver version is insufficient for CUDA runtime version
Result = FAIL
""",
        "-> CUDA driver version is insufficient",
    ),
    Case(
        "magma-large-matrix",
        "MAGMA gesv argument overflow",
        r"""Traceback (most recent call last):
  File "solve.py", line 9, in <module>
    x, lu = torch.gesv(b, A)
RuntimeError: MAGMA gesv : Argument 7 : illegal value at c:\programdata\miniconda3\conda-bld\pytorch_1524549877902\work\aten\src\thc\generic/THCTensorMathMagma.cu:83
""",
        "MAGMA gesv : Argument 7 : illegal value",
    ),
    Case(
        "nccl-distributed-unavailable",
        "NCCL backend on Windows",
        r"""Traceback (most recent call last):
  File "C:\work\train_ddp.py", line 31, in <module>
    dist.init_process_group(backend="nccl", init_method="env://")
  File "C:\Python311\Lib\site-packages\torch\distributed\distributed_c10d.py", line 1610, in _new_process_group_helper
    raise RuntimeError("Distributed package doesn't have NCCL built in")
RuntimeError: Distributed package doesn't have NCCL built in
""",
        "Distributed package doesn't have NCCL built in",
    ),
    Case(
        "nccl-distributed-unavailable",
        "0.4-era Windows build without torch.distributed",
        r"""Traceback (most recent call last):
  File "train_dist.py", line 12, in <module>
    dist.init_process_group(backend='gloo')
AttributeError: module 'torch.distributed' has no attribute 'init_process_group'
""",
        "module 'torch.distributed' has no attribute",
    ),
    # ---------------------------------------------------------------- build
    Case(
        "cuda-unsupported-host-compiler",
        "CUDA 13.0's nvcc given a GCC 16 in a Ninja build (the nvcc lines as the real nvcc wrote them here)",
        r"""[812/7044] Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Activation.cu.o
FAILED: caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Activation.cu.o
/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -c aten/src/ATen/native/cuda/Activation.cu -o Activation.cu.o
In file included from /usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h:82,
                 from <command-line>:
/usr/local/cuda/bin/../targets/x86_64-linux/include/crt/host_config.h:137:2: error: #error -- unsupported GNU version! gcc versions later than 15 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.
  137 | #error -- unsupported GNU version! gcc versions later than 15 are not supported! The nvcc flag '-allow-unsupported-compiler' can be used to override this version check; however, using an unsupported host compiler may cause compilation failure or incorrect run time execution. Use at your own risk.
      |  ^~~~~
ninja: build stopped: subcommand failed.
""",
        "host_config.h:137:2: error: #error -- unsupported GNU version!",
    ),
    Case(
        "cuda-unsupported-msvc",
        "CUDA 9.0 with a newer toolset, in a Ninja FAILED block",
        PYTORCH_NINJA_PREFIX
        + r"""[1203/4567] Building NVCC (Device) object caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/caffe2_gpu_generated_THCReduceApplyUtils.cu.obj
FAILED: caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/caffe2_gpu_generated_THCReduceApplyUtils.cu.obj
cmd.exe /C "cd /D C:\pytorch\build\caffe2\CMakeFiles\caffe2_gpu.dir\__\aten\src\THC && C:\Users\dev\Anaconda3\Library\bin\cmake.exe -D verbose:BOOL=OFF -D build_configuration:STRING=Release -D generated_file:STRING=C:/pytorch/build/caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/./caffe2_gpu_generated_THCReduceApplyUtils.cu.obj -P C:/pytorch/build/caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/caffe2_gpu_generated_THCReduceApplyUtils.cu.obj.Release.cmake"
THCReduceApplyUtils.cu
C:\Program Files\NVIDIA GPU Computing Toolkit\CUDA\v9.0\include\crt/host_config.h(133): fatal error C1189: #error:  -- unsupported Microsoft Visual Studio version! Only the versions 2012, 2013, 2015 and 2017 are supported!
CMake Error at caffe2_gpu_generated_THCReduceApplyUtils.cu.obj.Release.cmake:215 (message):
  Error generating
  C:/pytorch/build/caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/./caffe2_gpu_generated_THCReduceApplyUtils.cu.obj


ninja: build stopped: subcommand failed.
""",
        "fatal error C1189",
    ),
    Case(
        "cuda-unsupported-msvc",
        "nvcc rejects the host compiler (pytorch/pytorch#10242)",
        r"""tmpxft_0000120c_00000000-1.cpp
nvcc fatal   : Host compiler targets unsupported OS.
error: command 'C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v10.0\\bin\\nvcc.exe' failed with exit status 1
""",
        "nvcc fatal   : Host compiler targets unsupported OS.",
    ),
    Case(
        "nvcc-unsupported-gpu-arch",
        "CUDA 13.0 with an arch list that still names Maxwell, in a Ninja FAILED block",
        r"""-- Found CUDA: C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v13.0 (found version "13.0")
-- Added CUDA NVCC flags for: -gencode;arch=compute_50,code=sm_50;-gencode;arch=compute_75,code=sm_75
-- Build files have been written to: C:/pytorch/build
[1/8934] Building CXX object c10/CMakeFiles/c10.dir/util/Exception.cpp.obj
[2/8934] Building CUDA object caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Activation.cu.obj
FAILED: caffe2/CMakeFiles/torch_cuda.dir/__/aten/src/ATen/native/cuda/Activation.cu.obj
C:\PROGRA~1\NVIDIA~2\CUDA\v13.0\bin\nvcc.exe -forward-unknown-to-host-compiler -DTORCH_CUDA_BUILD_MAIN_LIB -IC:\pytorch\aten\src -Xcompiler /MD -gencode arch=compute_50,code=sm_50 -gencode arch=compute_75,code=sm_75 -x cu -c C:\pytorch\aten\src\ATen\native\cuda\Activation.cu -o caffe2\CMakeFiles\torch_cuda.dir\__\aten\src\ATen\native\cuda\Activation.cu.obj
nvcc fatal   : Unsupported gpu architecture 'compute_50'
ninja: build stopped: subcommand failed.
""",
        "Unsupported gpu architecture 'compute_50'",
    ),
    Case(
        "nvcc-unsupported-gpu-arch",
        "CUDA 12.0 rejects Kepler's compute_35 in a CMake project",
        r"""[1/74] Building CUDA object 0_hello_world\CMakeFiles\hello_world.dir\hello_world.cu.obj
FAILED: 0_hello_world/CMakeFiles/hello_world.dir/hello_world.cu.obj
C:\PROGRA~1\NVIDIA~2\CUDA\v12.0\bin\nvcc.exe -forward-unknown-to-host-compiler   -D_WINDOWS -Xcompiler=" /GR /EHsc" -Xcompiler="-Zi -Ob0 -Od /RTC1" "--generate-code=arch=compute_35,code=[compute_35,sm_35]" -Xcompiler=-MDd -x cu -c C:\src\0_hello_world\hello_world.cu -o 0_hello_world\CMakeFiles\hello_world.dir\hello_world.cu.obj
nvcc fatal   : Value 'compute_35' is not defined for option 'gpu-architecture'
ninja: build stopped: subcommand failed.
""",
        "Value 'compute_35' is not defined for option 'gpu-architecture'",
    ),
    Case(
        "vs-toolset-not-installed",
        "vcvars -vcvars_ver=14.11 without that toolset",
        r"""**********************************************************************
** Visual Studio 2017 Developer Command Prompt v15.9.4
** Copyright (c) 2017 Microsoft Corporation
**********************************************************************
[ERROR:vcvars.bat] Toolset directory for version '14.11' was not found.
[ERROR:VsDevCmd.bat] *** VsDevCmd.bat encountered errors. Environment may be incomplete and/or incorrect. ***
[ERROR:VsDevCmd.bat] In an uninitialized command prompt, please 'set VSCMD_DEBUG=[value]' and then re-run
[ERROR:VsDevCmd.bat] vsdevcmd.bat [args] for additional details.
""",
        "Toolset directory for version '14.11' was not found.",
    ),
    Case(
        "vs-toolset-not-installed",
        "MSBuild without the v141 platform toolset",
        r"""C:\Program Files (x86)\Microsoft Visual Studio\2019\BuildTools\MSBuild\Microsoft\VC\v160\Microsoft.CppBuild.targets(439,5): error MSB8020: The build tools for v141 (Platform Toolset = 'v141') cannot be found. To build using the v141 build tools, please install v141 build tools.  Alternatively, you may upgrade to the current Visual Studio tools by selecting the Project menu or right-click the solution, and then selecting "Retarget solution". [C:\pytorch\build\CMakeFiles\3.12.0\CompilerIdC\CompilerIdC.vcxproj]
""",
        "error MSB8020",
    ),
    Case(
        "compiler-out-of-heap",
        "C1060 under Ninja",
        PYTORCH_NINJA_PREFIX
        + r"""[2807/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/UnaryOpsKernel.cpp.AVX2.cpp.obj
FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/UnaryOpsKernel.cpp.AVX2.cpp.obj
C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1411~1.255\bin\HostX86\x64\cl.exe  /nologo /TP -DCPU_CAPABILITY=AVX2 /MD /O2 /Ob2 /bigobj /showIncludes /Focaffe2\CMakeFiles\torch_cpu.dir\__\aten\src\ATen\native\cpu\UnaryOpsKernel.cpp.AVX2.cpp.obj /FdTARGET_COMPILE_PDB /FS -c C:\pytorch\build\aten\src\ATen\native\cpu\UnaryOpsKernel.cpp.AVX2.cpp
UnaryOpsKernel.cpp.AVX2.cpp
C:\pytorch\aten\src\ATen/cpu/vec256/vec256_base.h(650): fatal error C1060: compiler is out of heap space
ninja: build stopped: subcommand failed.
""",
        "fatal error C1060: compiler is out of heap space",
    ),
    Case(
        "compiler-out-of-heap",
        "C1002 and C1076 under MSBuild",
        r"""  d:\face_4.0\mxnet\src\operator\mxnet_op.h(941): fatal error C1002: compiler is out of heap space in pass 2 [D:\build\mxnet.vcxproj]
  C:\pytorch\aten\src\ATen\native\cuda\Reduce.cuh(650): fatal error C1076: compiler limit: internal heap limit reached [C:\pytorch\build\caffe2\torch_cuda.vcxproj]
""",
        "fatal error C1002",
    ),
    Case(
        "cmake-generator-mismatch",
        "generator changed (pytorch/pytorch#30910)",
        r"""-- Building version 1.3.1
CMake Error: Error: generator : Ninja
Does not match the generator used previously: Visual Studio 15 2017 Win64
Either remove the CMakeCache.txt file and CMakeFiles directory or choose a different binary directory.
""",
        "Does not match the generator used previously: Visual Studio 15 2017 Win64",
    ),
    Case(
        "cmake-generator-mismatch",
        "toolset changed (pytorch/pytorch#39776)",
        r"""cmake -GVisual Studio 16 2019 -Ax64 -Tversion=14.26,host=x64 -DBUILD_PYTHON=True -DCMAKE_GENERATOR_TOOLSET_VERSION=14.26 D:\src\pytorch
CMake Error: Error: generator toolset: version=14.26,host=x64
Does not match the toolset used previously:
Either remove the CMakeCache.txt file and CMakeFiles directory or choose a different binary directory.
Traceback (most recent call last):
  File "setup.py", line 732, in <module>
    build_deps()
  File "D:\src\pytorch\tools\build_pytorch_libs.py", line 59, in build_caffe2
    cmake.generate(version, cmake_python_library, build_python, build_test, my_env, rerun_cmake)
subprocess.CalledProcessError: Command '['cmake', '-GVisual Studio 16 2019', '-Ax64', '-Tversion=14.26,host=x64', 'D:\\src\\pytorch']' returned non-zero exit status 1.
""",
        "Does not match the toolset used previously:",
    ),
    Case(
        "cmake-generator-mismatch",
        "checkout moved",
        r"""CMake Error: The current CMakeCache.txt directory C:/src/pytorch/build/CMakeCache.txt is different than the directory c:/Users/dev/pytorch/build where CMakeCache.txt was created. This may result in binaries being created in the wrong place. If you are not sure, reedit the CMakeCache.txt
""",
        "is different than the directory",
    ),
    Case(
        "cmake-generator-name-invalid",
        "trailing space after set CMAKE_GENERATOR=Ninja (seed 002)",
        "CMake Error: Could not create named generator Ninja \n\nGenerators\n* Visual Studio 17 2022        = Generates Visual Studio 2022 project files.\n  Ninja                        = Generates build.ninja files.\n",
        "Could not create named generator Ninja",
    ),
    Case(
        "path-too-long",
        "C1083 on a long generated path",
        r"""c1xx: fatal error C1083: Cannot open source file: 'C:\Users\averylongusername\Documents\Projects\deep-learning-experiments\third_party_builds\pytorch-from-source-on-windows\pytorch\build\caffe2\CMakeFiles\torch_cpu.dir\__\aten\src\ATen\native\quantized\cpu\kernels\QuantizedOpKernels.cpp.AVX2.cpp': No such file or directory
""",
        "c1xx: fatal error C1083",
    ),
    Case(
        "path-too-long",
        "MSBuild MSB3491 (facebookincubator/FBX2glTF#277)",
        r"""C:\Program Files (x86)\Microsoft Visual Studio\2017\Community\Common7\IDE\VC\VCTargets\Microsoft.CppBuild.targets(321,5): error MSB3491: Could not write lines to file "draco_compression_attributes_pred_schemes_dec.dir\Release\draco_co.18F60AB3.tlog\draco_compression_attributes_pred_schemes_dec.lastbuildstate". The specified path, file name, or both are too long. The fully qualified file name must be less than 260 characters, and the directory name must be less than 248 characters.
""",
        "error MSB3491",
    ),
    Case(
        "path-too-long",
        "pip WinError 206 (pytorch/TensorRT#4288)",
        r"""ERROR: Could not install packages due to an OSError: [WinError 206] The filename or extension is too long: 'C:\\actions-runner\\_work\\_temp\\conda_environment_26287354992\\Lib\\site-packages\\torch-2.13.0.dev20260522+cu130.dist-info\\licenses\\third_party\\kineto\\libkineto\\third_party\\dynolog\\third_party\\prometheus-cpp\\3rdparty\\civetweb\\src\\third_party\\duktape-1.5.2'
""",
        "[WinError 206] The filename or extension is too long",
    ),
    Case(
        "cuda-not-found",
        "FindCUDA fails",
        r"""-- Building for: Visual Studio 15 2017
CMake Error at C:/Program Files/CMake/share/cmake-3.12/Modules/FindPackageHandleStandardArgs.cmake:137 (message):
  Could NOT find CUDA (missing: CUDA_TOOLKIT_ROOT_DIR CUDA_NVCC_EXECUTABLE
  CUDA_INCLUDE_DIRS CUDA_CUDART_LIBRARY)
Call Stack (most recent call first):
  C:/Program Files/CMake/share/cmake-3.12/Modules/FindPackageHandleStandardArgs.cmake:378 (_FPHSA_FAILURE_MESSAGE)
  C:/Program Files/CMake/share/cmake-3.12/Modules/FindCUDA.cmake:1080 (find_package_handle_standard_args)
  CMakeLists.txt:12 (find_package)


-- Configuring incomplete, errors occurred!
""",
        "Could NOT find CUDA (missing: CUDA_TOOLKIT_ROOT_DIR",
    ),
    Case(
        "cuda-not-found",
        "Visual Studio generator without CUDA's MSBuild integration",
        r"""CMake Error at C:/Program Files/CMake/share/cmake-3.27/Modules/CMakeDetermineCompilerId.cmake:751 (message):
  No CUDA toolset found.
Call Stack (most recent call first):
  C:/Program Files/CMake/share/cmake-3.27/Modules/CMakeDetermineCompilerId.cmake:8 (CMAKE_DETERMINE_COMPILER_ID_BUILD)
  C:/Program Files/CMake/share/cmake-3.27/Modules/CMakeDetermineCUDACompiler.cmake:135 (CMAKE_DETERMINE_COMPILER_ID)
  CMakeLists.txt:2 (project)
""",
        "No CUDA toolset found.",
    ),
    Case(
        "nvtx-missing",
        "CUDA 12 without NVTX (pytorch/pytorch#133293)",
        r"""-- Found CUDAToolkit: C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v12.6/include (found version "12.6.20")
CMake Error at cmake/public/cuda.cmake:70 (message):
  Failed to find nvToolsExt
Call Stack (most recent call first):
  cmake/Dependencies.cmake:43 (include)
  CMakeLists.txt:857 (include)


-- Configuring incomplete, errors occurred!
""",
        "Failed to find nvToolsExt",
    ),
    Case(
        "nvtx-missing",
        "link without NvToolsExt",
        r"""[4501/4567] Linking CXX shared library bin\torch_cuda.dll
FAILED: bin/torch_cuda.dll lib/torch_cuda.lib
cmd.exe /C "cd . && C:\Users\dev\Anaconda3\Library\bin\cmake.exe -E vs_link_dll --intdir=caffe2\CMakeFiles\torch_cuda.dir --rc=C:\PROGRA~2\WI3CF2~1\10\bin\100177~1.0\x64\rc.exe --mt=C:\PROGRA~2\WI3CF2~1\10\bin\100177~1.0\x64\mt.exe --manifests  -- C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1416~1.270\bin\Hostx64\x64\link.exe /nologo @CMakeFiles\torch_cuda.rsp  /out:bin\torch_cuda.dll /implib:lib\torch_cuda.lib /pdb:bin\torch_cuda.pdb /dll /version:0.0 /machine:x64 /INCREMENTAL:NO  && cd ."
LINK: command "C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1416~1.270\bin\Hostx64\x64\link.exe /nologo @CMakeFiles\torch_cuda.rsp /out:bin\torch_cuda.dll /implib:lib\torch_cuda.lib /pdb:bin\torch_cuda.pdb /dll /version:0.0 /machine:x64 /INCREMENTAL:NO /MANIFEST /MANIFESTFILE:bin\torch_cuda.dll.manifest" failed (exit code 1104) with the following output:
LINK : fatal error LNK1104: cannot open file 'C:\Program Files\NVIDIA Corporation\NvToolsExt\lib\x64\nvToolsExt64_1.lib'
ninja: build stopped: subcommand failed.
""",
        "nvToolsExt64_1.lib",
    ),
    Case(
        "compiler-not-found",
        "configure in a plain cmd (no vcvars)",
        r"""-- The C compiler identification is unknown
-- The CXX compiler identification is unknown
CMake Error at CMakeLists.txt:4 (project):
  No CMAKE_C_COMPILER could be found.

  Tell CMake where to find the compiler by setting either the environment
  variable "CC" or the CMake cache entry CMAKE_C_COMPILER to the full path to
  the compiler, or to the compiler name if it is in the PATH.


-- Configuring incomplete, errors occurred!
""",
        "No CMAKE_C_COMPILER could be found.",
    ),
    Case(
        "compiler-not-found",
        "nvcc and cmd without cl.exe",
        r"""nvcc fatal   : Cannot find compiler 'cl.exe' in PATH
'cl' is not recognized as an internal or external command,
operable program or batch file.
""",
        "Cannot find compiler 'cl.exe' in PATH",
    ),
    Case(
        "ninja-missing",
        "CMAKE_GENERATOR=Ninja without ninja",
        r"""CMake Error: CMake was unable to find a build program corresponding to "Ninja".  CMAKE_MAKE_PROGRAM is not set.  You probably need to select a different build tool.
CMake Error: CMAKE_C_COMPILER not set, after EnableLanguage
CMake Error: CMAKE_CXX_COMPILER not set, after EnableLanguage
-- Configuring incomplete, errors occurred!
""",
        'CMake was unable to find a build program corresponding to "Ninja"',
    ),
    Case(
        "ninja-missing",
        "torch C++ extension without ninja",
        r"""Traceback (most recent call last):
  File "setup.py", line 20, in <module>
    cmdclass={'build_ext': BuildExtension})
  File "C:\Python311\Lib\site-packages\torch\utils\cpp_extension.py", line 1783, in verify_ninja_availability
    raise RuntimeError("Ninja is required to load C++ extensions")
RuntimeError: Ninja is required to load C++ extensions
""",
        "Ninja is required to load C++ extensions",
    ),
    Case(
        "mkl-not-on-lib",
        "LIB without MKL's lib folder",
        r"""LINK : fatal error LNK1104: cannot open file 'mkl_intel_lp64.lib'
""",
        "mkl_intel_lp64.lib",
    ),
    Case(
        "lnk1104-cannot-open",
        "DLL locked by a running Python",
        r"""[4566/4567] Linking CXX shared library bin\torch_cpu.dll
FAILED: bin/torch_cpu.dll lib/torch_cpu.lib
cmd.exe /C "cd . && C:\Users\dev\Anaconda3\Library\bin\cmake.exe -E vs_link_dll --intdir=caffe2\CMakeFiles\torch_cpu.dir --manifests  -- C:\PROGRA~2\MICROS~1\2017\COMMUN~1\VC\Tools\MSVC\1416~1.270\bin\Hostx64\x64\link.exe /nologo @CMakeFiles\torch_cpu.rsp  /out:bin\torch_cpu.dll /implib:lib\torch_cpu.lib /dll  && cd ."
LINK : fatal error LNK1104: cannot open file 'bin\torch_cpu.dll'
ninja: build stopped: subcommand failed.
""",
        "cannot open file 'bin\\torch_cpu.dll'",
    ),
    Case(
        "cffi-unresolved-state",
        "CFFI extension with extern THCState *state (seed 000)",
        r"""creating build\temp.win-amd64-3.6\Release\_ext\my_lib
my_lib.obj : error LNK2001: unresolved external symbol state
build\_ext\my_lib\_my_lib.cp36-win_amd64.pyd : fatal error LNK1120: 1 unresolved externals
error: command 'C:\\Program Files (x86)\\Microsoft Visual Studio 14.0\\VC\\BIN\\x86_amd64\\link.exe' failed with exit status 1120
""",
        "error LNK2001: unresolved external symbol state",
    ),
    Case(
        "msvc-14-required",
        "setuptools without build tools",
        r"""running build_ext
building 'my_ext' extension
error: Microsoft Visual C++ 14.0 or greater is required. Get it with "Microsoft C++ Build Tools": https://visualstudio.microsoft.com/visual-cpp-build-tools/
""",
        "Microsoft Visual C++ 14.0 or greater is required",
    ),
    Case(
        "distutils-use-sdk",
        "VC environment active, DISTUTILS_USE_SDK unset",
        r"""C:\Python311\Lib\site-packages\torch\utils\cpp_extension.py:381: UserWarning: It seems that the VC environment is activated but DISTUTILS_USE_SDK is not set.This may lead to multiple activations of the VC env.Please set `DISTUTILS_USE_SDK=1` and try again.
  warnings.warn(
""",
        "DISTUTILS_USE_SDK is not set",
    ),
    Case(
        "out-of-memory",
        "gcc killed on Linux",
        r"""[3120/5234] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/BinaryOpsKernel.cpp.AVX512.cpp.o
FAILED: caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/BinaryOpsKernel.cpp.AVX512.cpp.o
/usr/bin/c++ -DCPU_CAPABILITY=AVX512 -O3 -o caffe2/CMakeFiles/torch_cpu.dir/__/aten/src/ATen/native/cpu/BinaryOpsKernel.cpp.AVX512.cpp.o -c /src/pytorch/build/aten/src/ATen/native/cpu/BinaryOpsKernel.cpp.AVX512.cpp
c++: fatal error: Killed signal terminated program cc1plus
compilation terminated.
ninja: build stopped: subcommand failed.
""",
        "Killed signal terminated program cc1plus",
    ),
    Case(
        "out-of-memory",
        "nvcc and the MSVC linker out of memory",
        r"""nvcc error   : 'cicc' died due to signal 9 (Kill signal)
LINK : fatal error LNK1102: out of memory
""",
        "'cicc' died due to signal 9",
    ),
    Case(
        "out-of-memory",
        "older GCC killed by the OOM killer (pytorch/QNNPACK#28)",
        r"""[ 58%] Building CXX object caffe2/CMakeFiles/caffe2.dir/utils/math_cpu.cc.o
c++: internal compiler error: Killed (program cc1plus)
Please submit a full bug report,
with preprocessed source if appropriate.
""",
        "internal compiler error: Killed (program cc1plus)",
    ),
    Case(
        "out-of-memory",
        "the linker killed by the OOM killer (microsoft/vcpkg#17665)",
        r"""[606/710] : && /usr/bin/c++ -fPIC -std=c++11 -fopenmp -g -pie examples/CMakeFiles/rnn-training-f32-cpp.dir/rnn_training_f32.cpp.o -o examples/rnn-training-f32-cpp  src/libdnnl.a  -lpthread  -lm && :
FAILED: examples/rnn-training-f32-cpp
collect2: fatal error: ld terminated with signal 9 [Killed]
compilation terminated.
""",
        "collect2: fatal error: ld terminated with signal 9 [Killed]",
    ),
    Case(
        "cmake-too-old",
        "CMake older than the project needs",
        r"""CMake Error at CMakeLists.txt:1 (cmake_minimum_required):
  CMake 3.18 or higher is required.  You are running version 3.10.2


-- Configuring incomplete, errors occurred!
""",
        "CMake 3.18 or higher is required.",
    ),
    Case(
        "python-too-old",
        "setup.py version check",
        r"""C:\src\pytorch>python setup.py develop
You are using Python 3.7.9. Python >=3.8.0 is required.
""",
        "You are using Python 3.7.9.",
    ),
    Case(
        "cwrap-common-missing",
        "symlink checked out as a text file (seed 002 era)",
        r"""Traceback (most recent call last):
  File "setup.py", line 236, in <module>
    from tools.setup_helpers.generate_code import generate_code
  File "C:\src\pytorch\tools\setup_helpers\generate_code.py", line 4, in <module>
    from tools.shared import cwrap_common
  File "C:\src\pytorch\tools\shared\__init__.py", line 2, in <module>
    from .cwrap_common import set_declaration_defaults, \
  File "C:\src\pytorch\tools\shared\cwrap_common.py", line 1
    ../../aten/src/ATen/common_with_cwrap.py
    ^
SyntaxError: invalid syntax
""",
        "../../aten/src/ATen/common_with_cwrap.py",
    ),
    Case(
        "cwrap-common-missing",
        "file missing",
        r"""ModuleNotFoundError: No module named 'tools.shared.cwrap_common'
""",
        "No module named 'tools.shared.cwrap_common'",
    ),
    Case(
        "msvc-output-not-utf8",
        "Chinese MSVC output decoded as UTF-8",
        "Traceback (most recent call last):\n"
        '  File "setup.py", line 50, in <module>\n'
        "    setup(\n"
        '  File "C:\\Users\\\u5f20\u4e09\\miniconda3\\lib\\site-packages\\torch\\utils\\cpp_extension.py", line 358, in check_compiler_abi_compatibility\n'
        "    info = subprocess.check_output(compiler, stderr=subprocess.STDOUT).decode().strip()\n"
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd3 in position 0: invalid continuation byte\n",
        "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xd3",
    ),
)


# A successful CUDA build of PyTorch on Windows with Ninja, the shape of setup.py install's
# output: tricky lines included (warnings in files named *error*, "Error" inside class names,
# copied CUDA and NVTX DLLs, NCCL and distributed switched off in the summary).
CLEAN_WINDOWS_BUILD = (
    PYTORCH_NINJA_PREFIX
    + r"""-- Found cuDNN: v7.1.4  (include: C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v9.0/include, library: C:/Program Files/NVIDIA GPU Computing Toolkit/CUDA/v9.0/lib/x64/cudnn.lib)
-- Autodetected CUDA architecture(s): 6.1
-- Found MAGMA: C:/deps/magma/include
-- Looking for strerror_r - not found
-- Performing Test COMPILER_SUPPORTS_WERROR_FORMAT - Failed
--   USE_NCCL              : OFF
--   USE_DISTRIBUTED       : OFF
--   USE_MKLDNN            : ON
CMake Warning at cmake/Dependencies.cmake:1042 (message):
  Metal is only used in ios builds.
[3/4567] Building CXX object c10/CMakeFiles/c10.dir/util/Logging.cpp.obj
C:\pytorch\c10/util/Exception.h(29): warning C4251: 'c10::Error::msg_stack_': class 'std::vector<std::string,std::allocator<_Ty>>' needs to have dll-interface to be used by clients of class 'c10::Error'
cl : Command line warning D9025 : overriding '/DNDEBUG' with '/UNDEBUG'
[4/4567] Building NVCC (Device) object caffe2/CMakeFiles/caffe2_gpu.dir/__/aten/src/THC/caffe2_gpu_generated_THCTensorMathMagma.cu.obj
nvcc warning : The 'compute_20', 'sm_20', and 'sm_21' architectures are deprecated, and may be removed in a future release (Use -Wno-deprecated-gpu-targets to suppress warning).
THCTensorMathMagma.cu
[5/4567] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/torch/csrc/utils/python_error_messages.cpp.obj
[4566/4567] Linking CXX shared library bin\torch_cuda.dll
LINK : warning LNK4098: defaultlib 'LIBCMT' conflicts with use of other libs; use /NODEFAULTLIB:library
   Creating library lib\torch_cuda.lib and object lib\torch_cuda.exp
[4567/4567] Install the project...
-- Install configuration: "Release"
running install
copying torch\lib\caffe2_nvrtc.dll -> build\lib.win-amd64-3.6\torch\lib
copying torch\lib\nvToolsExt64_1.dll -> build\lib.win-amd64-3.6\torch\lib
copying torch\lib\mkl_intel_thread.dll -> build\lib.win-amd64-3.6\torch\lib
copying tools\shared\cwrap_common.py -> build\lib.win-amd64-3.6\tools\shared
byte-compiling build\bdist.win-amd64\egg\torch\utils\data\dataloader.py to dataloader.cpython-36.pyc
byte-compiling build\bdist.win-amd64\egg\torch\multiprocessing\reductions.py to reductions.cpython-36.pyc
Installed c:\users\dev\anaconda3\lib\site-packages\torch-0.4.0-py3.6-win-amd64.egg
Processing dependencies for torch==0.4.0
Finished processing dependencies for torch==0.4.0
"""
)

# A successful CPU build on Linux (gcc, Ninja), where FindCUDA reports CUDA as a status line.
CLEAN_LINUX_BUILD = r"""Building wheel torch-2.13.0a0+git1234abc
-- Building version 2.13.0a0+git1234abc
cmake -GNinja -DBUILD_PYTHON=True -DBUILD_TEST=True -DCMAKE_BUILD_TYPE=Release -DUSE_CUDA=0 /src/pytorch
-- The CXX compiler identification is GNU 12.2.0
-- Could NOT find CUDA (missing: CUDA_TOOLKIT_ROOT_DIR CUDA_NVCC_EXECUTABLE CUDA_INCLUDE_DIRS CUDA_CUDART_LIBRARY)
CMake Warning at cmake/public/cuda.cmake:31 (message):
  Caffe2: CUDA cannot be found.  Depending on whether you are building Caffe2
  or a Caffe2 dependent library, the next warning / error will give you more
  info.
-- Could NOT find NCCL (missing: NCCL_INCLUDE_DIR NCCL_LIBRARY)
-- Configuring done (41.2s)
-- Generating done (1.9s)
-- Build files have been written to: /src/pytorch/build
[1/5234] Building CXX object c10/CMakeFiles/c10.dir/util/Exception.cpp.o
In file included from /src/pytorch/aten/src/ATen/native/ReduceOps.cpp:4:
/src/pytorch/aten/src/ATen/native/ReduceOpsUtils.h:12:13: warning: unused variable 'kErrorLimit' [-Wunused-variable]
[2/5234] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/__/torch/csrc/jit/frontend/error_report.cpp.o
[5234/5234] Linking CXX shared library lib/libtorch_python.so
copying torch/lib/libtorch_cpu.so -> build/lib.linux-x86_64-cpython-311/torch/lib
Successfully built torch
"""

# A passing verification run: fresh interpreter, DataLoader with workers under the guard.
CLEAN_VERIFY = r"""python: C:\Users\dev\miniconda3\envs\build\python.exe (3.11.9, 64-bit)
torch 2.13.0+cpu from C:\Users\dev\miniconda3\envs\build\Lib\site-packages\torch
CUDA available: False (built without CUDA)
MKL: True   MAGMA: False   cuDNN: n/a
DataLoader(num_workers=2) under if __name__ == '__main__': 4 batches OK
verify: OK
"""

# pip installing the pieces of a build environment without trouble.
CLEAN_PIP = r"""Collecting ninja
  Downloading ninja-1.11.1.1-py2.py3-none-win_amd64.whl (312 kB)
Collecting numpy
  Using cached numpy-2.1.3-cp311-cp311-win_amd64.whl (12.9 MB)
Installing collected packages: ninja, numpy
Successfully installed ninja-1.11.1.1 numpy-2.1.3
"""

CLEAN_LOGS: dict[str, str] = {
    "windows-cuda-build": CLEAN_WINDOWS_BUILD,
    "linux-cpu-build": CLEAN_LINUX_BUILD,
    "verify": CLEAN_VERIFY,
    "pip": CLEAN_PIP,
}
