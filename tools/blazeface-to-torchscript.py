#!/usr/bin/env python3
"""BlazeFace's front model, ONNX -> TorchScript, for the dnndetect element's LibTorch engine.

    tools/blazeface-to-torchscript.py MODEL.onnx OUT.pt

Runs with the PyTorch and onnx of the machine that will load the model (Debian's python3-torch
and python3-onnx here, the GPU host's own there): TorchScript from a newer PyTorch may not load
in an older LibTorch, so the file is made where it is used, never committed.

The network is rebuilt from the ONNX graph node by node (Conv, Relu, Add, MaxPool, channel
padding by ConstantOfShape + Concat, Transpose, Reshape: every operator this model has; any other
is an error) with the weights read from the graph's initialisers, then traced. Two changes make
it a detector the element can batch:
- the input is NCHW RGB floats in [-1, 1] ([B, 3, 128, 128], PyTorch's layout; the ONNX takes
  NHWC), and every shape that the ONNX fixes at batch 1 follows the input's batch;
- the outputs are the two heads concatenated in anchor order (512 anchors of stride 8, then 384
  of stride 16): (regressors [B, 896, 16], logits [B, 896, 1]).
The check that the result equals OpenCV DNN on real frames is tests/gst-plugin/dnn.
"""
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F

HEAD_SIZES = (512, 384)
# The shapes the tracer sees as constants are constants: the model has one input size.
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
REGRESSORS = 16


class OnnxGraph(torch.nn.Module):
    """Evaluates the ONNX graph's nodes in order; traced, it becomes a flat TorchScript graph."""

    def __init__(self, graph):
        super().__init__()
        self.nodes = list(graph.node)
        self.input_name = graph.input[0].name
        self.output_names = [o.name for o in graph.output]
        self.constants = {}
        for i, init in enumerate(graph.initializer):
            array = onnx.numpy_helper.to_array(init)
            if array.dtype == np.float32:
                name = "w%d" % i
                self.register_buffer(name, torch.from_numpy(array.copy()))
                self.constants[init.name] = name
            else:
                self.constants[init.name] = [int(v) for v in array.reshape(-1)]

    def value(self, values, name):
        if name in values:
            return values[name]
        constant = self.constants[name]
        return getattr(self, constant) if isinstance(constant, str) else constant

    def forward(self, nchw):
        values = {}
        batch = nchw.shape[0]
        for node in self.nodes:
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
            args = [self.value(values, name) if name in values or name in self.constants
                    else None for name in node.input]
            op = node.op_type
            if op == "Transpose" and node.input[0] == self.input_name:
                # The ONNX's NHWC -> NCHW at the input: the input is NCHW already.
                out = nchw
            elif op == "Transpose":
                out = args[0].permute(*attrs["perm"])
            elif op == "Conv":
                top, left, bottom, right = attrs.get("pads", [0, 0, 0, 0])
                x = F.pad(args[0], (left, right, top, bottom))
                out = F.conv2d(x, args[1], args[2] if len(args) > 2 else None,
                               stride=attrs.get("strides", [1, 1]),
                               dilation=attrs.get("dilations", [1, 1]),
                               groups=attrs.get("group", 1))
            elif op == "Relu":
                out = F.relu(args[0])
            elif op == "Add":
                out = args[0] + args[1]
            elif op == "MaxPool":
                if any(attrs.get("pads", [0])):
                    raise SystemExit("MaxPool with padding is not supported")
                out = F.max_pool2d(args[0], attrs["kernel_shape"], attrs["strides"])
            elif op == "ConstantOfShape":
                # Constant channels that a Concat appends: kept as (channels, value) and made by
                # padding there. A created tensor would carry the tracing machine's device as a
                # constant of the trace, and fail on any other.
                value = attrs.get("value")
                fill = float(onnx.numpy_helper.to_array(value).reshape(-1)[0]) if value else 0.0
                out = (int(list(args[0])[1]), fill)
            elif op == "Concat":
                if len(args) == 2 and isinstance(args[1], tuple) and attrs["axis"] == 1:
                    channels, fill = args[1]
                    out = F.pad(args[0], (0, 0, 0, 0, 0, channels), value=fill)
                elif any(isinstance(a, tuple) for a in args):
                    raise SystemExit("ConstantOfShape only as the channels a Concat appends")
                else:
                    out = torch.cat(args, dim=attrs["axis"])
            elif op == "Reshape":
                shape = list(args[1])
                out = args[0].reshape([batch] + shape[1:])
            else:
                raise SystemExit("operator %s is not supported by this converter" % op)
            values[node.output[0]] = out
        outputs = [values[name] for name in self.output_names]
        heads = {}
        for out in outputs:
            heads[(int(out.shape[1]), int(out.shape[2]))] = out
        try:
            regressors = torch.cat([heads[(n, REGRESSORS)] for n in HEAD_SIZES], dim=1)
            logits = torch.cat([heads[(n, 1)] for n in HEAD_SIZES], dim=1)
        except KeyError:
            raise SystemExit("the outputs are not BlazeFace front's (1x512x1, 1x384x1, "
                             "1x512x16, 1x384x16)")
        return regressors, logits


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source, target = sys.argv[1:]
    graph = onnx.load(source).graph
    shape = [d.dim_value for d in graph.input[0].type.tensor_type.shape.dim]
    if shape != [1, 128, 128, 3]:
        raise SystemExit("%s: input %s is not BlazeFace front's 1x128x128x3" % (source, shape))
    model = OnnxGraph(graph).eval()
    example = torch.zeros(2, 3, 128, 128)
    with torch.no_grad():
        traced = torch.jit.trace(model, example, check_trace=False)
        # The batch must follow the input: one frame alone equals the same frame in a batch.
        frames = torch.rand(3, 3, 128, 128) * 2 - 1
        together = traced(frames)
        for i in range(3):
            alone = traced(frames[i:i + 1])
            for a, b in zip(alone, together):
                if not torch.allclose(a[0], b[i], atol=1e-4):
                    raise SystemExit("the traced model does not batch")
        # Every tensor must live where the input does (the CPU or a GPU): nothing may name the
        # tracing machine's device.
        if '"cpu"' in str(traced.inlined_graph):
            raise SystemExit("the traced model names the CPU device: it would not run on a GPU")
    traced.save(target + ".partial")
    import os
    os.replace(target + ".partial", target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
