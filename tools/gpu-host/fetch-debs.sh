#!/usr/bin/env bash
# On a Debian 12 machine with apt: downloads the Debian packages that build and run this project
# on a CUDA host that has no GStreamer, no meson and no OpenCV C++ (e.g. an Ubuntu GPU server),
# into DIR (default .device/debs, git-ignored). Carry DIR to the host and source
# tools/gpu-host/env.sh there. About 62 MB with the tests' sample media and NanoDet.
#   tools/gpu-host/fetch-debs.sh [DIR]
#   tools/gpu-host/fetch-debs.sh --service [DIR]   (default .device/debs-service) the camera
#     service and its loopback cameras instead of the tests' media: gst-plugins-good (rtspsrc),
#     gst-rtsp-server, libsoup 3 and etcd, and only the 1080p H.264 clip; about 61 MB, so that it
#     fits the device tool's carry (64 MiB) with the tree
#   tools/gpu-host/fetch-debs.sh --scale [DIR]     (default .device/scale) what
#     run-fleet-scale.sh needs: --service's packages without x264, the Prometheus parser and
#     the clip (57 MB)
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=tests
case "${1:-}" in --service | --scale)
  profile=${1#--}
  shift
  ;;
esac
dir=${1:-.device/debs}
[ "$profile" = service ] && dir=${1:-.device/debs-service}
[ "$profile" = scale ] && dir=${1:-.device/scale}

runtime=(libgstreamer1.0-0 gstreamer1.0-tools libgstreamer-plugins-base1.0-0
  gstreamer1.0-plugins-base libglib2.0-0 liborc-0.4-0 libunwind8 libdw1 libelf1 libffi8
  libpcre2-8-0 libmount1 libselinux1 libblkid1 libcap2 libzstd1 liblzma5 libbz2-1.0
  libjson-glib-1.0-0)
build=(libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libglib2.0-dev libglib2.0-dev-bin
  libgtest-dev libgmock-dev googletest libjson-glib-dev meson pkgconf pkgconf-bin libpkgconf3
  libunwind-dev libdw-dev libpcre2-dev libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libffi-dev
  liborc-0.4-dev zlib1g-dev libmount-dev libselinux1-dev libblkid-dev libsepol-dev liblzma-dev
  libelf-dev ninja-build)
# Debian's OpenCV 4.6 (the GPU host's Python OpenCV has no CascadeClassifier) for the OpenCV
# plugin, the cascade tests and the OpenCV peers of the benchmark.
opencv=(libopencv-core406 libopencv-imgproc406 libopencv-objdetect406 libopencv-calib3d406
  libopencv-dnn406 libopencv-features2d406 libopencv-flann406 libopencv-core-dev
  libopencv-imgproc-dev libopencv-objdetect-dev libopencv-dnn-dev libtbb12 libtbbmalloc2 libhwloc15 libblas3
  liblapack3 libopenblas0 libopenblas0-pthread libgfortran5 libquadmath0 libprotobuf32 libgl1
  libglx0 libglvnd0 libx11-6 libxcb1 libxau6 libxdmcp6 libxext6 libbsd0 libmd0 opencv-data)

# gst-plugins-bad's CUDA library (gstreamer-cuda-1.0: the shared GstCudaContext, GstCudaMemory) and
# its nvcodec plugin (cudaupload, cudadownload, nvh264dec where the driver has NVDEC), with what
# they load; libgl-dev for the GL header the CUDA library's headers include.
cuda_gst=(gstreamer1.0-plugins-bad libgstreamer-plugins-bad1.0-0 libgstreamer-plugins-bad1.0-dev
  libgstreamer-gl1.0-0 libgudev-1.0-0 libudev1 libwayland-client0 libwayland-cursor0
  libwayland-egl1 libwayland-server0 libgbm1 libdrm2 libegl1 libx11-xcb1 libexpat1 libgl-dev
  libglx-dev libgstreamer-plugins-base1.0-dev)

# The camera service (service/): RTSP client and server, libsoup 3 for its HTTP endpoint, SQLite
# for its events' history, with what they load that an Ubuntu GPU image may lack; x264 for its
# recordings and the service tests' clips; the Prometheus client's parser, which the service
# tests read /metrics with;
# etcd, for a fleet of hosts (run-fleet.sh); libjpeg for the operator page's pictures
# (jpegenc, run-snapshots.sh). (heaptrack, which found where the heap grew in
# issue 43, made way for etcd: the device tool carries 64 MiB with the tree.)
service=(gstreamer1.0-plugins-good libgstrtspserver-1.0-0 libgstrtspserver-1.0-dev libsoup-3.0-0
  libsoup-3.0-dev libsoup-3.0-common libnghttp2-14 libpsl5 libbrotli1 libsqlite3-0 libsqlite3-dev
  libunistring2 libidn2-0 libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libcom-err2 libkeyutils1
  gstreamer1.0-plugins-ugly libx264-164 python3-prometheus-client python3-decorator etcd-server
  libjpeg62-turbo)

mkdir -p "$dir"
cd "$dir"
if [ "$profile" = service ]; then
  apt-get download "${runtime[@]}" "${build[@]}" "${opencv[@]}" "${cuda_gst[@]}" "${service[@]}"
elif [ "$profile" = scale ]; then
  # The hosts' agents run no camera: no encoder, no clip; fleet-scale.py reads etcd's own metrics.
  scale=()
  for p in "${service[@]}"; do
    case "$p" in gstreamer1.0-plugins-ugly | libx264-* | python3-prometheus-client | python3-decorator) ;;
    *) scale+=("$p") ;; esac
  done
  apt-get download "${runtime[@]}" "${build[@]}" "${opencv[@]}" "${cuda_gst[@]}" "${scale[@]}"
  echo "downloaded $(ls ./*.deb | wc -l) packages into $dir ($(du -sh . | cut -f1))"
  exit 0
else
  apt-get download "${runtime[@]}" "${build[@]}" "${opencv[@]}" "${cuda_gst[@]}"
fi
mkdir -p media
# The sample media the cascade tests make their frames from (opencv-doc, which the README's
# set-up installs); env.sh turns them into PGMs with the host's Python OpenCV.
[ "$profile" = tests ] &&
  cp /usr/share/doc/opencv-doc/examples/data/{Megamind.avi,Megamind_bugy.avi,vtest.avi,messi5.jpg} media/
# BlazeFace's ONNX (the GPU host has no npm): env.sh puts it in the cache, and run-cuda-suite.sh
# converts it to TorchScript with the host's PyTorch for dnndetect.
[ "$profile" = tests ] && cp "$("$OLDPWD"/tools/fetch-blazeface.sh)" media/
# NanoDet-g's TF.js graph (7.7 MB), which run-cuda-suite.sh converts with the host's PyTorch
# (dnndetect model=nanodet), and darknet's photos, which the NanoDet tests run on (env.sh turns
# them into PPMs: this OpenCV C++ reads no JPEG).
if [ "$profile" = tests ]; then
  nanodet="$("$OLDPWD"/tools/fetch-nanodet.sh)"
  cp "$nanodet"/nanodet.json "$nanodet"/nanodet.bin "$nanodet"/LICENSE "$nanodet"/NOTICE media/
  cp /usr/share/darknet/data/{dog,eagle,giraffe,horses,kite,person,scream}.jpg media/
fi
# A 1080p H.264 stream of real video for the many-streams benchmark (pipelines/streams): Megamind
# scaled up, made here with x264 (gstreamer1.0-plugins-ugly); the GPU host decodes it with NVDEC.
# Its first 60 frames only (2.6 MB; the bench preloads 30): the whole clip (11 MB) left too little
# of the device tool's 64 MiB carry for the tree. No B-frames, as cameras send: the camera
# service's soak (run-service-soak.sh) serves it with rtsp-server --loop, frames in decoding order.
if [ ! -f media/megamind_1080p.h264 ]; then
  gst-launch-1.0 -q filesrc location=/usr/share/doc/opencv-doc/examples/data/Megamind.avi ! \
    decodebin ! identity eos-after=60 ! \
    videoconvert ! videoscale ! \
    video/x-raw,width=1920,height=1080,format=I420 ! x264enc speed-preset=fast bitrate=8000 bframes=0 \
    key-int-max=30 ! video/x-h264,stream-format=byte-stream,profile=high ! \
    filesink location=media/megamind_1080p.h264
fi
echo "downloaded $(ls ./*.deb | wc -l) packages into $dir ($(du -sh . | cut -f1))"
