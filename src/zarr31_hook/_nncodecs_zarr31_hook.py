"""Make zarr 3.1 see the nncodecs data types in a process that only imports zarr.

zarr 3.1 collects the ``zarr.data_type`` entry points but never loads them
(zarr >= 3.2 does), so an array of bfloat16 would not open unless nncodecs
had been imported first. This module, run at start-up by
``nncodecs-zarr31.pth``, waits for ``import zarr`` to finish and then, on
zarr < 3.2 only, imports ``nncodecs.codecs.zarr_dtypes``, which registers
the types. It costs nothing until zarr is imported, then a few milliseconds
(that module imports nothing else of nncodecs, nor ml_dtypes: see
tests/layers/test_layers.py), and does nothing on newer zarr.
"""

import sys
import warnings


class _AfterZarrImport:
    def find_spec(self, name, path=None, target=None):
        if name != "zarr":
            return None
        sys.meta_path.remove(self)  # one shot
        # Ask the finders that would have found zarr anyway, in their order.
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find else None
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _register(module)

        spec.loader.exec_module = exec_module
        return spec


def _register(zarr_module):
    version = getattr(zarr_module, "__version__", "0")
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return
    if (major, minor) >= (3, 2) or major < 3:
        return
    try:
        import nncodecs.codecs.zarr_dtypes  # noqa: F401  (registers on import)
    except Exception as exc:  # a broken nncodecs must not break zarr
        warnings.warn(f"nncodecs could not register its zarr data types: {exc}", stacklevel=2)


if "zarr" not in sys.modules:
    sys.meta_path.insert(0, _AfterZarrImport())
