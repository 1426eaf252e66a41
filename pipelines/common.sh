# Shared by the pipelines/ scripts: where the build is, and the detection chain they all use.
# Sourced, not run.

CUDANMS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The meson build directory: ./build unless CUDANMS_BUILD says otherwise.
CUDANMS_BUILD="${CUDANMS_BUILD:-$CUDANMS_ROOT/build}"
case "$CUDANMS_BUILD" in /*) ;; *) CUDANMS_BUILD="$PWD/$CUDANMS_BUILD" ;; esac
# Every plugin of the build is in one folder.
export GST_PLUGIN_PATH="$CUDANMS_BUILD/gst-plugin${GST_PLUGIN_PATH:+:$GST_PLUGIN_PATH}"
CUDANMS_RUN="$CUDANMS_BUILD/pipelines/cudanms-run"

OPENCV_DATA=/usr/share/doc/opencv-doc/examples/data
HAAR_FACES=/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml

die() {
  echo "$(basename "$0"): $*" >&2
  exit 2
}

need_build() {
  [ -x "$CUDANMS_RUN" ] || die "no $CUDANMS_RUN: build first (meson setup build && ninja -C build), or set CUDANMS_BUILD"
  need_plugins
}

# Every plugin the scripts use: the detectors', the overlay's and publishing's besides cudanms.
need_plugins() {
  local plugin
  for plugin in libgstcudanms libgstcudanmsopencv libgstcudanmscascade libgstcudanmsoverlay \
    libgstcudanmspublish; do
    [ -f "$CUDANMS_BUILD/gst-plugin/$plugin.so" ] ||
      die "gst-plugin/$plugin.so is not built in $CUDANMS_BUILD (see meson's plugins summary: libopencv-dev, libjson-glib-dev)"
  done
}

# A file name or URI as a URI.
to_uri() {
  case "$1" in
    *://*) echo "$1" ;;
    /*) echo "file://$1" ;;
    *) echo "file://$PWD/$1" ;;
  esac
}

# The people detector of the demo: NanoDet where dnndetect is built (LibTorch) and the set-up
# converted the model (tools/fetch-nanodet.sh, tools/nanodet-to-torchscript.py), else HOG.
people_model() {
  local cache="${XDG_CACHE_HOME:-$HOME/.cache}/cudanms/human-models-3.0.4"
  if [ -f "$CUDANMS_BUILD/gst-plugin/libgstcudanmsdnn.so" ] && [ -f "$cache/nanodet.torchscript.pt" ]; then
    echo nanodet
  else
    echo hog-people
  fi
}

# The preset's NMS threshold: NanoDet's own 0.6, 0.3 for the sliding windows.
default_iou() {
  case "$1" in
    nanodet|people-cars) echo 0.6 ;;
    *) echo 0.3 ;;
  esac
}

# detect_chain MODEL BACKEND IOU: "cvdetect ... ! cudanms name=nms ..." for a preset:
#   nanodet: NanoDet-g (COCO) on dnndetect, its people scoring 0.35 or more (NanoDet's demo's
#           threshold), kept per class as NanoDet keeps them (greedy NMS, IoU 0.6);
#   people-cars: the same, people and cars;
#   hog-people: OpenCV's HOG people detector, windows 48x96 to 128x256 (vtest.avi's pedestrians
#           are 60-120 pixels tall: the frame is upscaled 1.33x for the smallest), scale step 1.1;
#   people: nanodet where it is built and converted, else hog-people;
#   faces:  the Haar frontal-face cascade of opencv-data on cudacascade (the GPU when one is
#           usable, else its CPU twin), faces of 40x40 pixels and up, its windows grouped as
#           OpenCV's detectMultiScale groups them (method=group min-neighbors=3);
#   dnn-faces: MediaPipe's BlazeFace (front model) through OpenCV DNN, every anchor scoring 0.5
#           or more, merged by cudanms method=weighted as MediaPipe's own face graph merges them
#           (the model is fetched into the cache by tools/fetch-blazeface.sh when missing);
#   any other value: the path of a Haar/LBP cascade XML file, grouped like the faces.
detect_chain() {
  local model="$1" backend="$2" iou="$3" detector method=greedy
  [ "$model" = people ] && model="$(people_model)"
  case "$model" in
    nanodet) detector="dnndetect name=detector model=nanodet classes=person score-threshold=0.35 backend=$backend" ;;
    people-cars) detector="dnndetect name=detector model=nanodet classes=person,car score-threshold=0.35 backend=$backend" ;;
    hog-people) detector="cvdetect model=hog-people min-size=48x96 max-size=128x256 scale-factor=1.1 win-stride=8"
      method="group min-neighbors=2" ;;
    faces)
      [ -f "$HAAR_FACES" ] || die "no $HAAR_FACES: install the Debian package opencv-data"
      detector="cudacascade name=detector model=\"$HAAR_FACES\" label=face min-size=40x40 scale-factor=1.1"
      method="group min-neighbors=3" ;;
    dnn-faces)
      local onnx
      onnx="$("$CUDANMS_ROOT/tools/fetch-blazeface.sh")" || die "could not fetch the BlazeFace model"
      detector="blazeface name=detector model=\"$onnx\" score-threshold=0.5" method=weighted ;;
    *) [ -f "$model" ] || die "no model file $model"
      detector="cvdetect model=\"$model\" scale-factor=1.1" method="group min-neighbors=3" ;;
  esac
  echo "$detector ! cudanms name=nms method=$method iou-threshold=$iou backend=$backend keep-candidates=true stats-interval=25"
}

# track_chain LINES BUFFER: "boxtrack ! boxcount ..." after detect_chain: ids for the kept boxes,
# a lost track kept BUFFER frames, and counts over LINES ("NAME:x1,y1,x2,y2;...", in 0..1 of the
# frame); "" for tracking alone.
track_chain() {
  local lines="$1" buffer="$2"
  if [ -n "$lines" ]; then
    echo "boxtrack name=track track-buffer=$buffer ! boxcount name=count track-timeout=$buffer normalized=true lines=\"$lines\""
  else
    echo "boxtrack name=track track-buffer=$buffer"
  fi
}

# The output branch after the overlay: display, an MP4 file, or nothing.
sink_chain() {
  case "$1" in
    display) echo "videoconvert ! autovideosink sync=false" ;;
    none) echo "fakesink sync=false" ;;
    *.mp4) echo "videoconvert ! x264enc speed-preset=faster tune=zerolatency ! mp4mux ! filesink location=\"$1\"" ;;
    *) die "--output must be display, none or a file name ending in .mp4" ;;
  esac
}
