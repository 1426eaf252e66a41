#!/usr/bin/python3
"""HOTA computed a second way, for tests/tools/test_mot.cpp: TrackEval's HOTA metric
(JonathonLuiten/TrackEval, trackeval/metrics/hota.py) transcribed line for line onto dense
Python lists, with a dense Hungarian method (tools/sort-reference.py's; the C++ uses the
project's sparse solver). Plain Python: runs wherever the tests do.

  hota_reference.py GT.txt TRACKS.txt [GT2.txt TRACKS2.txt ...]

prints `HOTA DetA AssA LocA` of the sequences taken together (TrackEval's combination).
Ground-truth rows with a score below 1 are dropped, as mot-eval drops them.
"""
import importlib.util
import math
import os
import sys

# The dense Hungarian method of tools/sort-reference.py (the C++ uses the project's sparse solver).
_spec = importlib.util.spec_from_file_location(
    'sort_reference', os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'tools',
                                   'sort-reference.py'))
SORT = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(SORT)

EPS = sys.float_info.epsilon
ALPHAS = [0.05 + 0.05 * a for a in range(19)]  # np.arange(0.05, 0.99, 0.05)


def read(path, min_score):
    rows = []
    with open(path) as f:
        for line in f:
            v = line.strip().split(',')
            if len(v) < 7 or float(v[6]) < min_score:
                continue
            rows.append((int(float(v[0])), int(float(v[1])), float(v[2]), float(v[3]),
                         float(v[4]), float(v[5])))
    return rows


def iou(a, b):
    iw = max(0.0, min(a[0] + a[2], b[0] + b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[1] + a[3], b[1] + b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = a[2] * a[3] + b[2] * b[3] - inter
    return inter / union if inter > 0 and union > 0 else 0.0


def max_weight_assignment(weight):
    """linear_sum_assignment(-weight): rows and columns paired one to one (min(n, m) pairs) for
    the greatest total weight."""
    if len(weight) <= len(weight[0]):
        return SORT.min_cost_assignment([[-w for w in row] for row in weight])
    return [(i, j) for j, i in SORT.min_cost_assignment([[-w for w in col]
                                                          for col in zip(*weight)])]


def sequence(gt_rows, tr_rows):
    gt_ids = sorted({r[1] for r in gt_rows})
    tr_ids = sorted({r[1] for r in tr_rows})
    gi = {k: i for i, k in enumerate(gt_ids)}
    ti = {k: i for i, k in enumerate(tr_ids)}
    frames = sorted({r[0] for r in gt_rows} | {r[0] for r in tr_rows})
    data = []
    for f in frames:
        g = [r for r in gt_rows if r[0] == f]
        t = [r for r in tr_rows if r[0] == f]
        sim = [[iou(a[2:], b[2:]) for b in t] for a in g]
        data.append(([gi[r[1]] for r in g], [ti[r[1]] for r in t], sim))

    res = {k: [0.0] * 19 for k in ('HOTA_TP', 'HOTA_FN', 'HOTA_FP', 'LocA')}
    potential = [[0.0] * len(tr_ids) for _ in gt_ids]
    gt_count = [0] * len(gt_ids)
    tr_count = [0] * len(tr_ids)
    for g, t, sim in data:
        rows = [sum(r) for r in sim]
        cols = [sum(sim[i][j] for i in range(len(g))) for j in range(len(t))]
        for i in range(len(g)):
            for j in range(len(t)):
                denom = rows[i] + cols[j] - sim[i][j]
                if denom > 0 + EPS:
                    potential[g[i]][t[j]] += sim[i][j] / denom
        for k in g:
            gt_count[k] += 1
        for k in t:
            tr_count[k] += 1
    alignment = [[potential[i][j] / (gt_count[i] + tr_count[j] - potential[i][j])
                  for j in range(len(tr_ids))] for i in range(len(gt_ids))]

    matches = [[[0.0] * len(tr_ids) for _ in gt_ids] for _ in ALPHAS]
    for g, t, sim in data:
        if not g or not t:
            for a in range(19):
                res['HOTA_FN'][a] += len(g)
                res['HOTA_FP'][a] += len(t)
            continue
        score = [[alignment[g[i]][t[j]] * sim[i][j] for j in range(len(t))]
                 for i in range(len(g))]
        pairs = max_weight_assignment(score)
        for a, alpha in enumerate(ALPHAS):
            kept = [(i, j) for i, j in pairs if sim[i][j] >= alpha - EPS]
            res['HOTA_TP'][a] += len(kept)
            res['HOTA_FN'][a] += len(g) - len(kept)
            res['HOTA_FP'][a] += len(t) - len(kept)
            if kept:
                res['LocA'][a] += sum(sim[i][j] for i, j in kept)
            for i, j in kept:
                matches[a][g[i]][t[j]] += 1

    res['AssA'] = [0.0] * 19
    for a in range(19):
        total = 0.0
        for i in range(len(gt_ids)):
            for j in range(len(tr_ids)):
                m = matches[a][i][j]
                total += m * (m / max(1, gt_count[i] + tr_count[j] - m))
        res['AssA'][a] = total / max(1, res['HOTA_TP'][a])
    res['LocA'] = [max(1e-10, res['LocA'][a]) / max(1e-10, res['HOTA_TP'][a]) for a in range(19)]
    return res


def combine(all_res):
    res = {k: [sum(r[k][a] for r in all_res) for a in range(19)]
           for k in ('HOTA_TP', 'HOTA_FN', 'HOTA_FP')}
    for k in ('AssA', 'LocA'):
        res[k] = [sum(r[k][a] * r['HOTA_TP'][a] for r in all_res) / max(1e-10, res['HOTA_TP'][a])
                  for a in range(19)]
    return res


def main():
    paths = sys.argv[1:]
    if not paths or len(paths) % 2:
        sys.exit('usage: hota_reference.py GT.txt TRACKS.txt [GT2.txt TRACKS2.txt ...]')
    each = [sequence(read(paths[k], 1.0), read(paths[k + 1], -math.inf))
            for k in range(0, len(paths), 2)]
    res = each[0] if len(each) == 1 else combine(each)
    det = [res['HOTA_TP'][a] / max(1, res['HOTA_TP'][a] + res['HOTA_FN'][a] + res['HOTA_FP'][a])
           for a in range(19)]
    hota = [math.sqrt(det[a] * res['AssA'][a]) for a in range(19)]
    print('%.9f %.9f %.9f %.9f' % tuple(sum(x) / 19 for x in (hota, det, res['AssA'],
                                                              res['LocA'])))


if __name__ == '__main__':
    main()
