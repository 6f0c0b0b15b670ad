"""The NVIDIA GPUs and driver of this machine: NVML first, nvidia-smi second, never an error.

NVML answers in-process in milliseconds; where it cannot load, nvidia-smi is asked. No driver at all is a fact
("no GPUs"), not a failure. Sources: the NVML API reference; `nvidia-smi --help-query-gpu` for the CSV fields.
Design notes: docs/architecture.md.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from pytorch_winbuild.facts.model import Gpu
from pytorch_winbuild.facts.probe_common import Commands

SMI_FIELDS = ("index", "name", "compute_cap", "driver_version", "memory.total")
SMI_TIMEOUT = 15.0  # nvidia-smi waits for every GPU to answer; a wedged one takes seconds
_SMI_CUDA = re.compile(r"CUDA Version:\s*(\d+)\.(\d+)")


@dataclass(frozen=True)
class GpuFacts:
    gpus: tuple[Gpu, ...] | None  # None: not asked (a plan without CUDA needs no GPU facts)
    driver_version: str | None = None
    driver_cuda: str | None = None  # "13.0"
    source: str = ""  # "NVML", "nvidia-smi", "none" (the probe notes say why) or "not asked"


NOT_ASKED = GpuFacts(None, source="not asked")


class NvmlUnavailable(Exception):
    """NVML could not answer (no library, no driver, no permission); the message says which.

    `absent` is true when there is simply no NVIDIA driver (no library to load): a fact, not a problem.
    """

    def __init__(self, message: str, absent: bool = False) -> None:
        super().__init__(message)
        self.absent = absent


NvmlReader = Callable[[], GpuFacts]


def cuda_from_driver_int(value: int) -> str:
    """NVML's and CUDA's driver version integer: 13000 → '13.0', 11040 → '11.4'."""
    return f"{value // 1000}.{value % 1000 // 10}"


def read_nvml() -> GpuFacts:
    """Ask NVML; NvmlUnavailable with NVML's own reason when it cannot be loaded or initialised."""
    try:
        import pynvml
    except ImportError as exc:
        raise NvmlUnavailable(f"the nvidia-ml-py bindings are not installed ({exc})") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML: {exc}", absent=exc.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND) from None
    try:
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
        cuda = cuda_from_driver_int(pynvml.nvmlSystemGetCudaDriverVersion_v2())
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024)
            gpus.append(
                Gpu(
                    index=index,
                    name=_text(pynvml.nvmlDeviceGetName(handle)),
                    compute_capability=f"{major}.{minor}",
                    memory_mib=int(memory),
                )
            )
    except pynvml.NVMLError as exc:
        raise NvmlUnavailable(f"NVML: {exc}") from None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    return GpuFacts(tuple(gpus), driver, cuda, "NVML")


def _text(value: str | bytes) -> str:
    """Old bindings return bytes; control characters never reach a fact."""
    text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
    return "".join(ch for ch in text if ch.isprintable()).strip()


def _int(text: str) -> int | None:
    """'81559' or '81559 MiB' (a query without nounits) → 81559; '[N/A]' → None."""
    match = re.fullmatch(r"(\d+)(?: MiB)?", text.strip())
    return int(match.group(1)) if match else None


def parse_smi_query(output: str, fields: Iterable[str]) -> list[dict[str, str]]:
    """Rows of `nvidia-smi --query-gpu=... --format=csv` as field → value; a header row is skipped."""
    names = list(fields)
    rows = []
    for record in csv.reader(line for line in output.splitlines() if line.strip()):
        values = [value.strip() for value in record]
        if len(values) == len(names) and values[0] != "index":
            rows.append(dict(zip(names, values, strict=True)))
    return rows


def parse_smi_header_cuda(output: str) -> str | None:
    """'CUDA Version: 13.0' from nvidia-smi's banner (drivers from 410 on print it)."""
    match = _SMI_CUDA.search(output)
    return f"{int(match.group(1))}.{int(match.group(2))}" if match else None


def gpus_from_smi_rows(rows: list[dict[str, str]]) -> tuple[Gpu, ...]:
    gpus: list[Gpu] = []
    for row in rows:
        capability = row.get("compute_cap", "")
        index = _int(row["index"])
        gpus.append(
            Gpu(
                index=len(gpus) if index is None else index,
                name=_text(row["name"]),
                compute_capability=capability if re.fullmatch(r"\d{1,2}\.\d", capability) else None,
                memory_mib=_int(row.get("memory.total", "")),
            )
        )
    return tuple(gpus)


class GpuProbe:
    """NVML at once (in-process, milliseconds); nvidia-smi started beside the other probe commands only if
    NVML failed."""

    def __init__(self, nvml: NvmlReader | None, smi: Path | None, commands: Commands, ask: bool = True) -> None:
        """`ask` False: neither NVML nor nvidia-smi is started (a CPU-only plan; NVML's bindings alone take
        15 ms to import, and initialising NVML on Windows takes longer)."""
        self._smi = smi
        self._commands = commands
        self._nvml_problem = "NVML not asked"
        self._nvml_absent = True
        self._answer: GpuFacts | None = None if ask else NOT_ASKED
        if not ask:
            return
        if nvml is not None:
            try:
                self._answer = nvml()
                return
            except NvmlUnavailable as exc:
                self._nvml_problem = str(exc)
                self._nvml_absent = exc.absent
        if smi is not None:
            self._start(list(SMI_FIELDS))
            commands.start("nvidia-smi:header", [str(smi)], SMI_TIMEOUT)

    def _start(self, fields: list[str]) -> None:
        assert self._smi is not None
        self._commands.start(
            f"nvidia-smi:{len(fields)}",
            [str(self._smi), f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            SMI_TIMEOUT,
        )

    def result(self, notes: list[str]) -> GpuFacts:
        """The GPUs; a note says why there are none or why the answer is partial."""
        if self._answer is not None:
            return self._answer
        if self._smi is None:
            if not self._nvml_absent:
                notes.append(f"No GPU information: {self._nvml_problem}, and nvidia-smi is not installed.")
            return GpuFacts((), source="none")
        fields = list(SMI_FIELDS)
        query = self._commands.result(f"nvidia-smi:{len(fields)}")
        if query is not None and not query.ok and "compute_cap" in query.stdout + query.stderr:
            fields.remove(
                "compute_cap"
            )  # drivers before the field existed: "Field "compute_cap" is not a valid field to query."
            self._start(fields)
            query = self._commands.result(f"nvidia-smi:{len(fields)}")
            notes.append(
                "This NVIDIA driver's nvidia-smi does not report compute capabilities: pass --arch-list with "
                "your GPU's (https://developer.nvidia.com/cuda-gpus), or update the driver."
            )
        if query is None or not query.ok:
            problem = query.problem() if query is not None else "not run"
            notes.append(f"No GPU information: {self._nvml_problem}, and {self._smi} failed ({problem}).")
            return GpuFacts((), source="none")
        rows = parse_smi_query(query.stdout, fields)
        header = self._commands.result("nvidia-smi:header")
        cuda = parse_smi_header_cuda(header.stdout) if header is not None and header.ok else None
        driver = _text(rows[0]["driver_version"]) if rows else None
        return GpuFacts(gpus_from_smi_rows(rows), driver, cuda, "nvidia-smi")
