"""A Gradient and an object -> the gradient of a method bound to it (``grad(model.loss)``).

``@grad`` on a method in a class body gives one too, as ``m.dloss``. It holds the gradient
of the function (self its first parameter), shared by every object it is bound to.
"""

from __future__ import annotations

import copy
import functools
import types

from . import calls


class BoundGradient:
    """The gradient of a method bound to an object: ``grad(model.loss)``, or ``m.dloss``
    where ``dloss`` is ``@grad`` in a class body. Called with the method's arguments after
    self; the object is passed as self, and what the method reads from it (``self.W``) is
    read at each call, as values without gradient. The built gradient is the one of the
    function, shared by every object it is bound to.

    >>> from symdiff import grad
    >>> class Model:
    ...     def __init__(self, scale):
    ...         self.scale = scale
    ...     def loss(self, x):
    ...         return self.scale * x ** 2
    >>> grad(Model(3.0).loss)(2.0)
    12.0
    """

    __slots__ = ("gradient", "obj")

    def __init__(self, gradient, obj):
        self.gradient = gradient  # of the function, with self its first parameter
        self.obj = obj

    def __call__(self, *args, **kwargs):
        return self.gradient(self.obj, *args, **kwargs)

    @property
    def fun(self):
        """The method, bound to the object: what was differentiated."""
        return types.MethodType(self.gradient.fun, self.obj)

    @property
    def wrt(self):
        return calls.shifted_back(self.gradient.wrt)

    def function_for(self, *args, **kwargs):
        """The function a call with these arguments (after self) runs, self given."""
        return functools.partial(self.gradient.function_for(self.obj, *args, **kwargs),
                                 self.obj)

    def source_for(self, *args, **kwargs) -> str:
        """The generated source a call with these arguments (after self) runs."""
        return self.gradient.source_for(self.obj, *args, **kwargs)

    def __getattr__(self, name):
        # source, math(), latex(), __wrapped__...: the function's gradient's.
        if name.startswith("__") and name not in ("__wrapped__", "__name__"):
            raise AttributeError(name)
        return getattr(self.gradient, name)

    def __reduce__(self):
        # The object is pickled with it (a bound method pickles its object too).
        return BoundGradient, (self.gradient, self.obj)

    def __copy__(self):
        return BoundGradient(copy.copy(self.gradient), self.obj)

    def __deepcopy__(self, memo):
        return BoundGradient(copy.copy(self.gradient), copy.deepcopy(self.obj, memo))

    def __repr__(self):
        what = "value_and_grad" if self.gradient.with_value else "grad"
        return (f"<symdiff {what} of {getattr(self.gradient.fun, '__qualname__', '?')} "
                f"bound to {self.obj!r} wrt {self.wrt}>")

    def _repr_latex_(self):
        return self.gradient._repr_latex_()

    def _repr_markdown_(self):
        return self.gradient._repr_markdown_()
