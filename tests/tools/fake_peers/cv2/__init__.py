"""A stand-in for cv2.dnn.NMSBoxes (see ../torch): OpenCV 4.6's rule, in double, without
NMSBoxesBatched, so that the script's per-class loop runs."""

import numpy as np

__version__ = "fake"


class dnn:
    @staticmethod
    def NMSBoxes(bboxes, scores, score_threshold, nms_threshold):
        bboxes = np.asarray(bboxes, dtype=np.float64)
        scores = np.asarray(scores)
        order = [i for i in np.argsort(-scores, kind="stable") if scores[i] > score_threshold]
        kept = []
        for i in order:
            x, y, w, h = bboxes[i]
            suppressed = False
            for j in kept:
                X, Y, W, H = bboxes[j]
                iw = max(0.0, min(x + w, X + W) - max(x, X))
                ih = max(0.0, min(y + h, Y + H) - max(y, Y))
                inter = iw * ih
                if inter / (w * h + W * H - inter) > nms_threshold:
                    suppressed = True
                    break
            if not suppressed:
                kept.append(i)
        return np.asarray(kept, dtype=np.int32).reshape(-1, 1)
