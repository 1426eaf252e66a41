#!/usr/bin/python3
"""SORT (Bewley et al., "Simple Online and Realtime Tracking", ICIP 2016) as its authors' sort.py
runs it, in plain Python: the peer whose tracks `cudanms-tool count-eval` ranks boxtrack's
counts against, runnable wherever python3 is (no numpy, scipy or filterpy).

Written from the paper and the published algorithm, step for step: a constant-velocity Kalman
filter over (centre x, centre y, area, aspect) with filterpy's defaults and SORT's noise
(R[2:,2:] x 10, P[4:,4:] x 1000, P x 10, Q[4:,4:] x 0.01, Q[6,6] x 0.01), the area's speed zeroed
before it would make the area negative, IoU association (a maximum-IoU assignment unless every
detection and track has at most one candidate above the threshold), pairs under the threshold
unmatched; a track is reported on a frame it was matched on once `min-hits` matches in a row (or
in the first `min-hits` frames), and dropped after `max-age` frames unmatched.

  sort-reference.py det.txt > tracks.txt   [--max-age 1] [--min-hits 3] [--iou 0.3]

Input and output are MOTChallenge text: `frame,id,x,y,w,h,score,...`, frames from 1.
"""
import argparse
import math
import sys


def matmul(a, b):
    return [[sum(a[i][k] * b[k][j] for k in range(len(b))) for j in range(len(b[0]))]
            for i in range(len(a))]


def transpose(a):
    return [list(row) for row in zip(*a)]


def add(a, b):
    return [[x + y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def sub(a, b):
    return [[x - y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]


def identity(n, scale=1.0):
    return [[scale if i == j else 0.0 for j in range(n)] for i in range(n)]


def inverse(a):
    """Gauss-Jordan with partial pivoting (the innovation covariance: 4 x 4, positive definite)."""
    n = len(a)
    m = [list(row) + identity(n)[i] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        pivot = m[c][c]
        m[c] = [v / pivot for v in m[c]]
        for r in range(n):
            if r != c and m[r][c] != 0.0:
                f = m[r][c]
                m[r] = [v - f * w for v, w in zip(m[r], m[c])]
    return [row[n:] for row in m]


F = identity(7)
for i in range(3):
    F[i][i + 4] = 1.0
H = [[1.0 if j == i else 0.0 for j in range(7)] for i in range(4)]
H_T = transpose(H)


def to_z(box):
    x1, y1, x2, y2 = box
    w, h = x2 - x1, y2 - y1
    return [[x1 + w / 2.0], [y1 + h / 2.0], [w * h], [w / float(h)]]


def to_box(x):
    w = math.sqrt(x[2][0] * x[3][0])
    h = x[2][0] / w
    return [x[0][0] - w / 2.0, x[1][0] - h / 2.0, x[0][0] + w / 2.0, x[1][0] + h / 2.0]


class Track:
    count = 0

    def __init__(self, box):
        self.R = identity(4)
        for i in (2, 3):
            self.R[i][i] *= 10.0
        self.P = identity(7, 10.0)
        for i in (4, 5, 6):
            self.P[i][i] *= 1000.0
        self.Q = identity(7)
        self.Q[6][6] *= 0.01
        for i in (4, 5, 6):
            self.Q[i][i] *= 0.01
        self.x = to_z(box) + [[0.0], [0.0], [0.0]]
        Track.count += 1
        self.id = Track.count
        self.time_since_update = 0
        self.hit_streak = 0

    def predict(self):
        if self.x[6][0] + self.x[2][0] <= 0:
            self.x[6][0] = 0.0
        self.x = matmul(F, self.x)
        self.P = add(matmul(matmul(F, self.P), transpose(F)), self.Q)
        if self.time_since_update > 0:
            self.hit_streak = 0
        self.time_since_update += 1
        return to_box(self.x)

    def update(self, box):
        self.time_since_update = 0
        self.hit_streak += 1
        y = sub(to_z(box), matmul(H, self.x))
        PHT = matmul(self.P, H_T)
        S = add(matmul(H, PHT), self.R)
        K = matmul(PHT, inverse(S))
        self.x = add(self.x, matmul(K, y))
        # filterpy's Joseph form: P = (I - KH) P (I - KH)' + K R K'.
        I_KH = sub(identity(7), matmul(K, H))
        self.P = add(matmul(matmul(I_KH, self.P), transpose(I_KH)),
                     matmul(matmul(K, self.R), transpose(K)))


def iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def min_cost_assignment(cost):
    """Rows to columns of least total cost, rows <= columns (the Hungarian method, potentials)."""
    n, m = len(cost), len(cost[0])
    u, v, match, way = [0.0] * (n + 1), [0.0] * (m + 1), [0] * (m + 1), [0] * (m + 1)
    for i in range(1, n + 1):
        match[0] = i
        j0 = 0
        least = [math.inf] * (m + 1)
        used = [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = match[j0], math.inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = cost[i0 - 1][j - 1] - u[i0] - v[j]
                    if reduced < least[j]:
                        least[j], way[j] = reduced, j0
                    if least[j] < delta:
                        delta, j1 = least[j], j
            for j in range(m + 1):
                if used[j]:
                    u[match[j]] += delta
                    v[j] -= delta
                else:
                    least[j] -= delta
            j0 = j1
            if match[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            match[j0] = match[j1]
            j0 = j1
    return [(match[j] - 1, j - 1) for j in range(1, m + 1) if match[j]]


def associate(dets, predicted, threshold):
    if not dets or not predicted:
        return [], list(range(len(dets)))
    overlap = [[iou(d, t) for t in predicted] for d in dets]
    above = [[1 if o > threshold else 0 for o in row] for row in overlap]
    rows, cols = [sum(r) for r in above], [sum(c) for c in zip(*above)]
    if max(rows) == 1 and max(cols) == 1:
        pairs = [(d, t) for d in range(len(dets)) for t in range(len(predicted)) if above[d][t]]
    elif len(dets) <= len(predicted):
        pairs = min_cost_assignment([[-o for o in row] for row in overlap])
    else:
        pairs = [(d, t) for t, d in min_cost_assignment([[-o for o in col]
                                                         for col in zip(*overlap)])]
    matched = [(d, t) for d, t in pairs if overlap[d][t] >= threshold]
    taken = {d for d, _ in matched}
    return matched, [d for d in range(len(dets)) if d not in taken]


class Sort:
    def __init__(self, max_age, min_hits, threshold):
        self.max_age, self.min_hits, self.threshold = max_age, min_hits, threshold
        self.tracks, self.frame_count = [], 0

    def update(self, dets):
        self.frame_count += 1
        predicted, kept = [], []
        for t in self.tracks:
            box = t.predict()
            if all(math.isfinite(v) for v in box):
                predicted.append(box)
                kept.append(t)
        self.tracks = kept
        matched, unmatched = associate(dets, predicted, self.threshold)
        for d, t in matched:
            self.tracks[t].update(dets[d])
        for d in unmatched:
            self.tracks.append(Track(dets[d]))
        out = []
        for t in reversed(self.tracks):
            if t.time_since_update < 1 and (t.hit_streak >= self.min_hits
                                            or self.frame_count <= self.min_hits):
                out.append((t.id, to_box(t.x)))
        self.tracks = [t for t in self.tracks if t.time_since_update <= self.max_age]
        return out


def read_detections(path):
    frames = {}
    with open(path) as f:
        for number, line in enumerate(f, 1):
            fields = line.strip().split(',')
            if len(fields) < 7:
                if line.strip():
                    sys.exit('%s:%d: expected frame,id,x,y,w,h,score' % (path, number))
                continue
            try:
                frame = int(float(fields[0]))
                x, y, w, h = (float(v) for v in fields[2:6])
            except ValueError:
                sys.exit('%s:%d: not a number' % (path, number))
            frames.setdefault(frame, []).append([x, y, x + w, y + h])
    return frames


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('detections')
    parser.add_argument('--max-age', type=int, default=1)
    parser.add_argument('--min-hits', type=int, default=3)
    parser.add_argument('--iou', type=float, default=0.3)
    args = parser.parse_args()
    try:
        frames = read_detections(args.detections)
    except OSError as e:
        sys.exit('%s: %s' % (args.detections, e.strerror))
    tracker = Sort(args.max_age, args.min_hits, args.iou)
    for frame in range(1, max(frames, default=0) + 1):
        for track_id, (x1, y1, x2, y2) in tracker.update(frames.get(frame, [])):
            print('%d,%d,%.2f,%.2f,%.2f,%.2f,1,-1,-1,-1' % (frame, track_id, x1, y1, x2 - x1,
                                                            y2 - y1))


if __name__ == '__main__':
    main()
