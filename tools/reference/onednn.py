"""What oneDNN does for the PyTorch peers: its version, and the kernel (and so the ISA) it picks.

A peer's speed depends on which kernel oneDNN dispatches to on the CPU at hand (e.g.
`brgemm:avx512_core_amx_bf16` on a CPU with AMX, `brgemm:avx512_core_bf16` without), so the
benchmarks print it next to the peer's numbers instead of assuming it.
"""

import os
import re
import tempfile

import torch


def version():
    found = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def kernel(dtype):
    """The oneDNN implementation name of one linear of dtype, read from oneDNN's verbose log.

    oneDNN writes that log to the C stdout, so fd 1 is pointed at a temporary file for the one call.
    """
    x = torch.randn(64, 256).to(dtype)
    w = torch.randn(256, 256).to(dtype).to_mkldnn()
    with tempfile.TemporaryFile(mode="w+") as log:
        saved = os.dup(1)
        try:
            os.dup2(log.fileno(), 1)
            with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
                torch._C._nn.mkldnn_linear(x.to_mkldnn(), w, None)
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        log.seek(0)
        for line in log:
            f = line.split(",")
            if len(f) > 4 and f[1] == "exec" and f[3] == "inner_product":
                return f[4]
    return "unknown"
