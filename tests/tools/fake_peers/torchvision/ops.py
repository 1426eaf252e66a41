import numpy as np

from torch import Tensor


def _greedy(boxes, scores, threshold):
    order = np.argsort(-scores, kind="stable")
    b = boxes[order]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    removed = np.zeros(len(order), dtype=bool)
    kept = []
    for i in range(len(order)):
        if removed[i]:
            continue
        kept.append(order[i])
        iw = np.maximum(np.minimum(b[i, 2], b[:, 2]) - np.maximum(b[i, 0], b[:, 0]), np.float32(0))
        ih = np.maximum(np.minimum(b[i, 3], b[:, 3]) - np.maximum(b[i, 1], b[:, 1]), np.float32(0))
        inter = iw * ih
        union = area[i] + area - inter
        iou = np.where(union > 0, inter / np.where(union > 0, union, 1), np.float32(0))
        removed[i + 1:] |= iou[i + 1:] > np.float32(threshold)
    return np.asarray(kept, dtype=np.int64)


def nms(boxes, scores, iou_threshold):
    assert boxes.on == "cuda" and scores.on == "cuda"
    return Tensor(_greedy(boxes.array, scores.array, iou_threshold), "cuda")


def batched_nms(boxes, scores, idxs, iou_threshold):
    assert idxs.on == "cuda"
    kept = []
    for c in np.unique(idxs.array):
        members = np.flatnonzero(idxs.array == c)
        kept.extend(members[_greedy(boxes.array[members], scores.array[members], iou_threshold)])
    kept = np.asarray(sorted(kept, key=lambda i: (-scores.array[i], i)), dtype=np.int64)
    return Tensor(kept, "cuda")
