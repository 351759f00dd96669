"""symdiff: symbolic gradients of NumPy functions, emitted as readable NumPy source.

>>> import numpy as np
>>> from symdiff import grad
>>> @grad
... def f(x):
...     return np.sin(x) * x
>>> round(f(1.0), 6)
1.381773
"""

__version__ = "0.1.0"

from .api import grad, value_and_grad  # noqa: E402
from .audit import audit  # noqa: E402
from .errors import SymdiffError  # noqa: E402
from .higher import hessian, jacobian, jvp  # noqa: E402
from .runtime import stop_gradient  # noqa: E402

__all__ = ["grad", "value_and_grad", "jvp", "jacobian", "hessian", "stop_gradient", "audit",
           "SymdiffError", "__version__"]
