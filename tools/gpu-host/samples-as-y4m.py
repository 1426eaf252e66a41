#!/usr/bin/env python3
"""OpenCV's sample videos for a GPU host whose GStreamer (the Debian packages of fetch-debs.sh)
has no AVI demuxer or MPEG-4 decoder: each AVI's first frames re-written as YUV4MPEG2 (4:2:0),
which decodebin plays with gst-plugins-bad's y4mdec, under the AVI's own name (decodebin finds the
format from the bytes, not the name), so that the tests asking for Megamind.avi get its frames as
FFmpeg (the host's Python OpenCV) decodes them. Every other file is linked as it is.
    samples-as-y4m.py SAMPLES_DIR OUT_DIR [MAX_FRAMES]   (default 300 frames a video)"""
import os
import sys

import cv2


def write_y4m(src, dst, max_frames):
    capture = cv2.VideoCapture(src)
    fps = capture.get(cv2.CAP_PROP_FPS) or 25.0
    frames = 0
    with open(dst + ".part", "wb") as out:
        while frames < max_frames:
            ok, bgr = capture.read()
            if not ok:
                break
            height, width = bgr.shape[:2]
            if frames == 0:
                out.write(f"YUV4MPEG2 W{width} H{height} F{round(fps * 1000)}:1000 Ip A1:1 "
                          "C420jpeg\n".encode())
            out.write(b"FRAME\n")
            out.write(cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420).tobytes())
            frames += 1
    if frames == 0:
        os.unlink(dst + ".part")
        sys.exit(f"{src}: no frame decoded")
    os.replace(dst + ".part", dst)
    return frames


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    src_dir, out_dir = sys.argv[1], sys.argv[2]
    max_frames = int(sys.argv[3]) if len(sys.argv) == 4 else 300
    os.makedirs(out_dir, exist_ok=True)
    for name in sorted(os.listdir(src_dir)):
        src, dst = os.path.join(src_dir, name), os.path.join(out_dir, name)
        if os.path.lexists(dst):
            continue
        if name.lower().endswith(".avi"):
            print(f"{name}: {write_y4m(src, dst, max_frames)} frames as Y4M")
        else:
            os.symlink(os.path.abspath(src), dst)


if __name__ == "__main__":
    main()
