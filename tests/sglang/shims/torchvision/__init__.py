"""Test-only stand-in for torchvision next to a CPU-only torch (e.g. torch 2.13.0+cpu).

PyPI's Linux x86_64 torchvision wheels are CUDA builds: their _C.so links libtorch_cuda.so, so
with a CPU torch `import torchvision` dies ("operator torchvision::nms does not exist").
SGLang <= 0.5.20 imports torchvision at import time (sglang/srt/utils/common.py:
`from torchvision.io import decode_jpeg`, plus multimodal configs), and transformers imports
it once it is findable. Nothing a tokenizer test runs touches images: every name here is a
placeholder that raises when called, and any `torchvision.X.Y` submodule is synthesized.
"""

import enum
import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+tokbackend.shim"


class InterpolationMode(enum.Enum):
    NEAREST = "nearest"
    NEAREST_EXACT = "nearest-exact"
    BILINEAR = "bilinear"
    BICUBIC = "bicubic"
    BOX = "box"
    HAMMING = "hamming"
    LANCZOS = "lanczos"


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
    RGBA = 4


class _Placeholder:
    """A torchvision name: usable in annotations and defaults, raises when called."""

    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"torchvision shim: {self._name} is not available in this test venv")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __mro_entries__(self, bases):
        return (object,)


_KNOWN = {"InterpolationMode": InterpolationMode, "ImageReadMode": ImageReadMode}


def _module_getattr(module_name):
    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr in _KNOWN:
            return _KNOWN[attr]
        return _Placeholder(f"{module_name}.{attr}")

    return __getattr__


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path=None, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = _module_getattr(spec.name)
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_Finder())
__getattr__ = _module_getattr(__name__)
