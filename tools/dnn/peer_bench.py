"""What the Python peers of cudanms-dnn-bench share: the frames (raw 1080p BGR from a file, or
frames of random blocks, as cudanms-dnn-bench makes them) and the timing of a chain."""
import time

import numpy as np
import torch

W, H = 1920, 1080


def frames_of(path, count):
    """`count` 1920x1080 BGR frames (H x W x 3 uint8): those of the raw file, then random 30x30
    blocks."""
    frames = []
    if path:
        raw = np.fromfile(path, dtype=np.uint8)
        for i in range(min(raw.size // (W * H * 3), count)):
            frames.append(raw[i * W * H * 3:(i + 1) * W * H * 3].reshape(H, W, 3))
    rng = np.random.default_rng(7)
    while len(frames) < count:
        frames.append(np.kron(rng.integers(0, 256, (H // 30 + 1, W // 30 + 1, 3), dtype=np.uint8),
                              np.ones((30, 30, 1), dtype=np.uint8))[:H, :W])
    return frames


def timed(fn, arg, runs):
    """p50 and p99 in ms of fn(arg) to its last GPU operation, after five warm-up runs."""
    for _ in range(5):
        fn(arg)
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(arg)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(0.99 * len(times)))]
