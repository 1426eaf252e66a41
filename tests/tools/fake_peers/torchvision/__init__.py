"""A stand-in for torchvision.ops.nms and batched_nms (see ../torch): greedy NMS in float32 by
the rule of torchvision and cudanms, in numpy."""

from . import ops

__version__ = "fake"
