"""The nncodecs codecs: each a Zarr v3 codec and a numcodecs codec of one id."""

from nncodecs.codecs.bitreorder import BitReorder, NumcodecsBitReorder
from nncodecs.codecs.planes import NumcodecsPlanes, Planes
from nncodecs.codecs.zarr_dtypes import register_data_types

register_data_types()

__all__ = ["BitReorder", "NumcodecsBitReorder", "NumcodecsPlanes", "Planes"]
