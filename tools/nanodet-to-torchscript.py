#!/usr/bin/env python3
"""NanoDet-g's TF.js graph model -> TorchScript, for the dnndetect element's LibTorch engine.

    tools/nanodet-to-torchscript.py MODEL_DIR/nanodet.json OUT.pt

Runs with the PyTorch of the machine that will load the model (Debian's python3-torch here, the
GPU host's own there): TorchScript from a newer PyTorch may not load in an older LibTorch, so
the file is made where it is used, never committed.

The graph (a TensorFlow graph converted from NanoDet's ONNX: NHWC convolutions between
transposes) is evaluated node by node with torch operators and traced. Every operator the model
has is implemented (Conv2D, Add/AddV2, LeakyRelu, Pad/PadV2, MaxPool, ConcatV2, ResizeBilinear
with half-pixel centres, SplitV, Sigmoid, Reshape, Transpose, Identity, and SparseToDense on
constants); any other is an error. The weights are the file's float16 values widened to float32,
as TF.js widens them. Three things make it a network the GPU runs well and the element batches:
- a transpose only relabels a tensor's dimensions (each value carries the permutation from its
  logical layout to its stored one), so the network runs in NCHW without copying between layouts;
- a zero Pad before a convolution, and a -inf one before a max pool, become their padding, and
  the bias Add after a convolution its bias;
- the Reshapes that the graph writes for batch 1 follow the input's batch, and the six outputs
  are concatenated in anchor order (stride 8, 16, 32): (scores [B, 3549, 80] after the graph's
  sigmoid, box distributions [B, 3549, 44]).
The check that it equals TF.js on real photos is tests/gst-plugin/dnn (test_nanodet.cpp).
"""
import base64
import json
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn.functional as F

INPUT = [1, 3, 416, 416]
ANCHORS = (52 * 52, 26 * 26, 13 * 13)
CLASSES, DISTRIBUTION = 80, 44
warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)


def fail(message):
    raise SystemExit("nanodet-to-torchscript: " + message)


def read_weights(manifest, data):
    """The manifest's tensors from the weights file, float16 widened to float32."""
    weights, at = {}, 0
    for group in manifest:
        for w in group["weights"]:
            count = int(np.prod(w["shape"])) if w["shape"] else 1
            quantized = w.get("quantization", {}).get("dtype")
            if quantized == "float16":
                dtype = np.float16
            elif quantized is None and w["dtype"] in ("float32", "int32"):
                dtype = np.dtype(w["dtype"])
            else:
                fail("weight %s: dtype %s (quantized %s) is not supported" %
                     (w["name"], w["dtype"], quantized))
            size = count * np.dtype(dtype).itemsize
            if at + size > len(data):
                fail("the weights file is shorter than its manifest (truncated?)")
            array = np.frombuffer(data, dtype=dtype, count=count, offset=at)
            weights[w["name"]] = array.astype(np.float32 if dtype == np.float16 else dtype) \
                .reshape(w["shape"])
            at += size
    if at != len(data):
        fail("the weights file has %d bytes, its manifest %d" % (len(data), at))
    return weights


class Value:
    """A tensor computed from the input: `data` as stored, its logical dimension i stored as
    dimension perm[i]; pad, when set, is a padding not yet applied: (value, per stored dimension
    (before, after))."""

    def __init__(self, data, perm=None, pad=None):
        self.data = data
        self.perm = list(perm) if perm is not None else list(range(data.dim()))
        self.pad = pad

    def padded(self):
        if self.pad is None:
            return self.data
        value, pairs = self.pad
        flat = []
        for before, after in reversed(pairs):
            flat += [before, after]
        return F.pad(self.data, flat, value=value)

    def stored_as(self, perm):
        """The data stored with this permutation (padding applied)."""
        if perm == self.perm:
            return self.padded()
        logical = self.padded().permute(self.perm)
        inverse = [perm.index(i) for i in range(len(perm))]
        return logical.permute(inverse)

    def logical(self):
        return self.padded().permute(self.perm)


NHWC_AS_NCHW = [0, 2, 3, 1]  # an NHWC logical tensor stored as NCHW


def attr(node, name, default=None):
    a = node.get("attr", {}).get(name)
    if a is None:
        return default
    if "b" in a:
        return a["b"]
    if "f" in a:
        return float(a["f"])
    if "i" in a:
        return int(a["i"])
    if "s" in a:
        return base64.b64decode(a["s"]).decode()
    if "list" in a:
        return [int(v) for v in a["list"].get("i", [])]
    return a


class TfjsGraph(torch.nn.Module):
    def __init__(self, model, weights):
        super().__init__()
        graph = model["modelTopology"]["node"]
        self.nodes = {n["name"]: n for n in graph}
        self.constants = {}
        # Convolution weights stored as PyTorch takes them (OIHW, from TensorFlow's HWIO): a
        # permutation in the trace would copy them on every forward.
        kernels = {n["input"][1] for n in graph if n["op"] == "Conv2D"}
        for i, (name, array) in enumerate(weights.items()):
            if name in kernels:
                if array.ndim != 4:
                    fail("%s: a convolution's weights of %d dimensions" % (name, array.ndim))
                array = np.ascontiguousarray(array.transpose(3, 2, 0, 1))
            if array.dtype == np.float32:
                buffer = "w%d" % i
                self.register_buffer(buffer, torch.from_numpy(array.copy()))
                self.constants[name] = buffer
            else:
                self.constants[name] = array
        signature = model.get("signature", {})
        self.input_name = [n["name"] for n in graph if n["op"] == "Placeholder"]
        if len(self.input_name) != 1:
            fail("the graph has %d inputs, NanoDet one" % len(self.input_name))
        self.input_name = self.input_name[0]
        self.output_names = [o.split(":")[0] for o in signature.get("outputs", {})]
        if len(self.output_names) != 6:
            fail("the graph has %d outputs, NanoDet six" % len(self.output_names))
        consumers = {}
        for n in graph:
            for i in n.get("input", []):
                consumers.setdefault(i.split(":")[0].lstrip("^"), []).append(n["name"])
        self.consumers = consumers

    def constant(self, name):
        c = self.constants[name]
        return getattr(self, c) if isinstance(c, str) else c

    def forward(self, nchw):
        self.values = {self.input_name: Value(nchw)}
        self.batch = nchw.shape[0]
        outputs = [self.value(name).logical() for name in self.output_names]
        scores = sorted((o for o in outputs if o.shape[2] == CLASSES), key=lambda o: -o.shape[1])
        boxes = sorted((o for o in outputs if o.shape[2] == DISTRIBUTION),
                       key=lambda o: -o.shape[1])
        if [o.shape[1] for o in scores] != list(ANCHORS) or \
                [o.shape[1] for o in boxes] != list(ANCHORS):
            fail("the outputs are not NanoDet-g's ([1, N, 80] and [1, N, 44] for N = %s), got %s"
                 % (ANCHORS, [list(o.shape) for o in outputs]))
        return torch.cat(scores, dim=1).contiguous(), torch.cat(boxes, dim=1).contiguous()

    def value(self, ref):
        name, _, index = ref.partition(":")
        if name in self.constants:
            return self.constant(name)
        if name not in self.values:
            node = self.nodes.get(name)
            if node is None:
                fail("the graph names a node it lacks: " + name)
            self.values[name] = self.evaluate(node)
        v = self.values[name]
        return v[int(index or 0)] if isinstance(v, tuple) else v

    def tensor(self, ref):
        v = self.value(ref)
        if not isinstance(v, Value):
            fail("%s: a constant where a tensor was expected" % ref)
        return v

    def evaluate(self, node):
        op, inputs = node["op"], node.get("input", [])
        if op == "Identity":
            return self.value(inputs[0])
        if op == "SparseToDense":
            indices, shape, values, default = (np.asarray(self.value(i)) for i in inputs)
            dense = np.full(shape.astype(np.int64), default, dtype=values.dtype)
            for k, index in enumerate(indices.reshape(len(indices), -1) if indices.size else []):
                dense[tuple(index)] = values.reshape(-1)[k if values.size > 1 else 0]
            return dense
        if op in ("Add", "AddV2"):
            return self.add(node, *inputs)
        if op == "Transpose":
            v, order = self.tensor(inputs[0]), [int(i) for i in self.value(inputs[1])]
            return Value(v.data, [v.perm[i] for i in order], v.pad)
        if op in ("Pad", "PadV2"):
            v = self.tensor(inputs[0])
            pairs = np.asarray(self.value(inputs[1])).reshape(-1, 2)
            fill = float(np.asarray(self.value(inputs[2]))) if op == "PadV2" else 0.0
            stored = [(0, 0)] * len(pairs)
            for logical, (before, after) in enumerate(pairs):
                stored[v.perm[logical]] = (int(before), int(after))
            return Value(v.padded() if v.pad else v.data, v.perm, (fill, stored))
        if op == "Conv2D":
            return self.conv(node, None)
        if op == "LeakyRelu":
            v = self.tensor(inputs[0])
            return Value(F.leaky_relu(v.padded(), attr(node, "alpha")), v.perm)
        if op == "Sigmoid":
            v = self.tensor(inputs[0])
            return Value(torch.sigmoid(v.padded()), v.perm)
        if op == "MaxPool":
            return self.max_pool(node)
        if op == "ConcatV2":
            parts = [self.tensor(i) for i in inputs[:-1]]
            axis = int(self.value(inputs[-1]))
            perm = parts[0].perm
            if all(p.perm == perm for p in parts):
                return Value(torch.cat([p.padded() for p in parts], dim=perm[axis]), perm)
            return Value(torch.cat([p.logical() for p in parts], dim=axis))
        if op == "ResizeBilinear":
            if not attr(node, "half_pixel_centers") or attr(node, "align_corners"):
                fail("%s: only half-pixel-centre bilinear resizing is supported" % node["name"])
            v = self.tensor(inputs[0])
            size = [int(s) for s in self.value(inputs[1])]
            out = F.interpolate(v.stored_as(NHWC_AS_NCHW), size=size, mode="bilinear",
                                align_corners=False)
            return Value(out, NHWC_AS_NCHW)
        if op == "SplitV":
            v = self.tensor(inputs[0])
            sizes = [int(s) for s in self.value(inputs[1])]
            axis = int(self.value(inputs[2]))
            parts = torch.split(v.padded(), sizes, dim=v.perm[axis])
            return tuple(Value(p, v.perm) for p in parts)
        if op == "Reshape":
            v = self.tensor(inputs[0])
            shape = [int(s) for s in self.value(inputs[1])]
            if shape[0] != 1:
                fail("%s: a Reshape whose batch is not the graph's 1" % node["name"])
            return Value(v.logical().reshape([self.batch] + shape[1:]))
        fail("operator %s (%s) is not supported by this converter" % (op, node["name"]))

    def add(self, node, a, b):
        x, y = self.value(a), self.value(b)
        if not isinstance(x, Value) and not isinstance(y, Value):
            return np.asarray(x) + np.asarray(y)
        if isinstance(y, Value) and not isinstance(x, Value):
            x, y, a, b = y, x, b, a
        producer = self.nodes.get(a.split(":")[0])
        if not isinstance(y, Value):
            if producer and producer["op"] == "Conv2D" and len(self.consumers[producer["name"]]) == 1:
                return self.conv(producer, y)
            bias = y if torch.is_tensor(y) else torch.from_numpy(np.asarray(y, np.float32))
            if bias.dim() != 1:
                fail("%s: only a per-channel constant can be added" % node["name"])
            shape = [1] * x.data.dim()
            shape[x.perm[-1]] = bias.shape[0]
            return Value(x.padded() + bias.reshape(shape), x.perm)
        if x.perm == y.perm:
            return Value(x.padded() + y.padded(), x.perm)
        return Value(x.logical() + y.logical())

    def conv(self, node, bias):
        """An NHWC Conv2D (its weights stored as OIHW) on data stored as NCHW, its pending zero
        padding and its bias taken in."""
        if attr(node, "data_format", "NHWC") != "NHWC" or attr(node, "padding") != "VALID":
            fail("%s: only NHWC convolutions with explicit padding are supported" % node["name"])
        if attr(node, "dilations", [1, 1, 1, 1]) != [1, 1, 1, 1]:
            fail("%s: dilated convolutions are not supported" % node["name"])
        v = self.tensor(node["input"][0])
        weight = self.constant(node["input"][1])
        if not torch.is_tensor(weight) or weight.dim() != 4:
            fail("%s: the weights are not a 4-dimensional constant" % node["name"])
        strides = attr(node, "strides")
        padding = self.fold_pad(v, 0.0)
        x = v.data if padding is not None else v.stored_as(NHWC_AS_NCHW)
        out = F.conv2d(x, weight, bias, stride=strides[1:3],
                       padding=padding or 0)
        return Value(out, NHWC_AS_NCHW)

    def max_pool(self, node):
        if attr(node, "data_format", "NHWC") != "NHWC" or attr(node, "padding") != "VALID":
            fail("%s: only NHWC max pools with explicit padding are supported" % node["name"])
        v = self.tensor(node["input"][0])
        kernel, strides = attr(node, "ksize")[1:3], attr(node, "strides")[1:3]
        padding = self.fold_pad(v, float("-inf"))
        if padding is not None and all(2 * p <= k for p, k in zip(padding, kernel)):
            return Value(F.max_pool2d(v.data, kernel, strides, padding), NHWC_AS_NCHW)
        return Value(F.max_pool2d(v.stored_as(NHWC_AS_NCHW), kernel, strides), NHWC_AS_NCHW)

    @staticmethod
    def fold_pad(v, fill):
        """(pad_h, pad_w) when v is stored as NCHW with only an even spatial padding of `fill`
        pending, which the operator can take instead; else None."""
        if v.perm != NHWC_AS_NCHW or v.pad is None:
            return None
        value, pairs = v.pad
        if value != fill or pairs[0] != (0, 0) or pairs[1] != (0, 0):
            return None
        if pairs[2][0] != pairs[2][1] or pairs[3][0] != pairs[3][1]:
            return None
        return [pairs[2][0], pairs[3][0]]


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    source, target = sys.argv[1:]
    try:
        with open(source) as f:
            model = json.load(f)
        manifest = model["weightsManifest"]
        model["modelTopology"]["node"]
    except (OSError, ValueError, KeyError) as e:
        fail("%s is not a TF.js graph model: %s" % (source, e))
    inputs = model.get("signature", {}).get("inputs", {})
    shapes = [[int(d["size"]) for d in i["tensorShape"]["dim"]] for i in inputs.values()]
    if shapes != [INPUT]:
        fail("%s: input %s is not NanoDet-g's %s" % (source, shapes, INPUT))
    folder = os.path.dirname(source)
    paths = [p for group in manifest for p in group["paths"]]
    try:
        data = b"".join(open(os.path.join(folder, p), "rb").read() for p in paths)
    except OSError as e:
        fail("the weights cannot be read: %s" % e)
    module = TfjsGraph(model, read_weights(manifest, data)).eval()
    with torch.no_grad():
        traced = torch.jit.trace(module, torch.zeros(2, 3, 416, 416), check_trace=False)
        # The batch must follow the input: a frame alone equals the same frame in a batch.
        frames = torch.randn(3, 3, 416, 416)
        together = traced(frames)
        for i in range(3):
            for a, b in zip(traced(frames[i:i + 1]), together):
                if not torch.allclose(a[0], b[i], atol=1e-4):
                    fail("the traced model does not batch")
        if '"cpu"' in str(traced.inlined_graph):
            fail("the traced model names the CPU device: it would not run on a GPU")
    partial = target + ".partial"
    traced.save(partial)
    os.replace(partial, target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
