#!/usr/bin/env python3
"""A tiny YOLO-shaped TorchScript for the dnndetect tests: random weights, Ultralytics' output
layout [B, 4 + classes, anchors] (boxes as centre x, y, width, height in input pixels, then
sigmoid class scores), made with the PyTorch of the machine that runs the tests. With "sync",
its forward also reads a count back to the host (torch.nonzero), as some users' networks do,
which no CUDA graph can capture; its outputs are the same. With "one-frame", it refuses a batch
of more than one frame, as a network exported for a fixed batch of 1 does.

    make-tiny-yolo.py OUT.pt INPUT_SIZE CLASSES [sync | one-frame]
"""
import sys

import torch


class TinyYolo(torch.nn.Module):
    def __init__(self, input_size, classes, sync):
        super().__init__()
        self.input_size = float(input_size)
        self.sync = sync
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 16, 3, stride=2, padding=1), torch.nn.ReLU())
        self.head = torch.nn.Conv2d(16, 4 + classes, 1)

    def forward(self, x):
        y = self.head(self.features(x)).flatten(2)  # [B, 4 + C, anchors]
        size = self.input_size
        centre = torch.sigmoid(y[:, 0:2]) * size
        extent = torch.sigmoid(y[:, 2:4]) * size / 4
        scores = torch.sigmoid(y[:, 4:] * 4)
        if self.sync:
            scores = scores + 0.0 * torch.nonzero(scores > 2.0).sum()
        return torch.cat([centre, extent, scores], dim=1)


class OneFrame(torch.nn.Module):
    def __init__(self, network):
        super().__init__()
        self.network = network

    def forward(self, x):
        if x.size(0) != 1:
            raise RuntimeError("this network takes one frame at a time")
        return self.network(x)


def main():
    out, size, classes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    variant = sys.argv[4] if len(sys.argv) > 4 else ""
    torch.manual_seed(7)
    model = TinyYolo(size, classes, variant == "sync").eval()
    with torch.no_grad():
        traced = torch.jit.trace(model, torch.zeros(1, 3, size, size))
    if variant == "one-frame":
        traced = torch.jit.script(OneFrame(traced))
    traced.save(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
