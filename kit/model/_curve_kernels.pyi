# Stub of the C extension built from _curve_kernels.c (buffers of float64).
from typing import Any

def huber_linear(s: Any, y: Any, sw: Any, f_scale: float, a0: float, b0: float,
                 scale_a: float, scale_b: float, max_iter: int, /
                 ) -> tuple[float, float, int, float]: ...
