#!/usr/bin/env python3
"""Writes the raw windows of OpenCV's cascade on one grey frame as csv lines x1,y1,x2,y2,score
(the level weight), for cudanms-tool bench --input: the candidates that grouping meets in a face
pipeline. detectMultiScale3 with minNeighbors 0, as cudacascade emits them.
    cascade-windows.py FRAME.pgm CASCADE.xml [MIN_SIZE] [SCALE_FACTOR] > windows.csv"""
import sys

import cv2

frame, cascade = sys.argv[1], sys.argv[2]
min_size = int(sys.argv[3]) if len(sys.argv) > 3 else 40
factor = float(sys.argv[4]) if len(sys.argv) > 4 else 1.1
gray = cv2.imread(frame, cv2.IMREAD_GRAYSCALE)
if gray is None:
    sys.exit(f"{frame}: not an image")
rects, _, weights = cv2.CascadeClassifier(cascade).detectMultiScale3(
    gray, factor, 0, minSize=(min_size, min_size), outputRejectLevels=True)
for (x, y, w, h), score in zip(rects, weights.reshape(-1)):
    print(f"{x},{y},{x + w},{y + h},{float(score)!r}")
