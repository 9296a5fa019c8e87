"""The x86 feature flags of this machine's CPU, as /proc/cpuinfo lists them
(avx2, avx512_vnni, ...); empty where there is no /proc/cpuinfo. Tests use
it where ONNX Runtime's results depend on the ISA (its u8 x s8 kernels
without VNNI saturate)."""

import pathlib


def cpu_flags():
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# CPUs with these have an exact u8 x s8 dot product (vpdpbusd or AMX).
VNNI_FLAGS = {"avx512_vnni", "avx_vnni", "amx_int8"}
