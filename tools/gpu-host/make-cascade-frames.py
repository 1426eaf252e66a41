#!/usr/bin/env python3
"""Writes the cascade tests' frames as grey PGMs, for hosts whose OpenCV C++ cannot decode video
(the GPU host's recipe has no videoio): the same frames tests/kernels/cascade_support.h builds
where it can, made with the host's Python OpenCV.
    make-cascade-frames.py SAMPLES_DIR OUT_DIR   (SAMPLES_DIR holds Megamind.avi, vtest.avi,
                                                   messi5.jpg from Debian's opencv-doc)
    make-cascade-frames.py --videos SAMPLES_DIR OUT_DIR [STRIDE]
        every STRIDE-th frame (default every frame) of the videos the grouping tests compare, as
        OUT_DIR/NAME_NNNN.pgm, NNNN the frame's index (for test_group_opencv and test_cudacascade:
        CUDANMS_VIDEO_FRAMES=OUT_DIR)"""
import os
import sys

import cv2
import numpy as np

# Megamind_bugy: the clip issue 44 found the element's default grouping wrong on, which no test
# had tuned to.
VIDEOS = ("Megamind", "vtest", "Megamind_bugy")


def video_frames(path, wanted):
    capture = cv2.VideoCapture(path)
    out, index = [], 0
    while len(out) < len(wanted):
        ok, frame = capture.read()
        if not ok:
            break
        if index == wanted[len(out)]:
            out.append(frame)
        index += 1
    if len(out) != len(wanted):
        sys.exit(f"{path}: could not read frames {wanted}")
    return out


def write_videos(samples, out_dir, stride):
    os.makedirs(out_dir, exist_ok=True)
    for name in VIDEOS:
        capture = cv2.VideoCapture(os.path.join(samples, name + ".avi"))
        index = 0
        while True:
            ok, frame = capture.read()
            if not ok:
                break
            if index % stride == 0:
                gray = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY)
                cv2.imwrite(os.path.join(out_dir, f"{name}_{index:04d}.pgm"), gray)
            index += 1
        if index == 0:
            sys.exit(f"{name}.avi: no frames")
        print(f"wrote every {stride} of {index} frames of {name}.avi into {out_dir}")


def main():
    if sys.argv[1] == "--videos":
        write_videos(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 1)
        return
    samples, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    mega = video_frames(os.path.join(samples, "Megamind.avi"), [30, 60, 120])
    vtest = video_frames(os.path.join(samples, "vtest.avi"), [0])
    messi = cv2.imread(os.path.join(samples, "messi5.jpg"))
    six = video_frames(os.path.join(samples, "Megamind.avi"), [0, 40, 80, 120, 160, 200])
    tile = np.zeros((1080, 1920, 3), np.uint8)
    for i, frame in enumerate(six):
        x, y = (i % 3) * 640, (i // 3) * 540
        tile[y:y + 540, x:x + 640] = cv2.resize(frame, (640, 540), interpolation=cv2.INTER_AREA)
    vtest_big = cv2.resize(vtest[0], (1920, 1080), interpolation=cv2.INTER_LINEAR)
    named = {"megamind_030": mega[0], "megamind_060": mega[1], "megamind_120": mega[2],
             "vtest_000": vtest[0], "messi5": messi, "megamind_tile_1080p": tile,
             "vtest_1080p": vtest_big}
    for name, bgr in named.items():
        cv2.imwrite(os.path.join(out_dir, name + ".pgm"), cv2.cvtColor(bgr, cv2.COLOR_BGR2GRAY))
    print(f"wrote {len(named)} frames into {out_dir}")


if __name__ == "__main__":
    main()
