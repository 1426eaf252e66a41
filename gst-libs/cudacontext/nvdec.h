/* The NVDEC decoders of gst-plugins-bad's nvcodec, one element per GPU and codec (nvh264dec on
 * the first, nvh264device1dec on the second, ...; each a rank below the first's), and the GPU
 * each decodes on, so that a camera's frames are decoded on the GPU its detector runs on. */
#pragma once

#include <gst/gst.h>

#include <functional>
#include <string>
#include <vector>

/* The CUDA device that elements of @factory decode on (their cuda-device-id), or -1 for a
 * factory that is no NVIDIA decoder (or does not tell). Cached per factory. */
int gst_cv_nvdec_device(GstElementFactory *factory);

/* The name of the NVDEC element that decodes @codec ("h264", "h265") on @gpu; "" when there is
 * none. */
std::string gst_cv_nvdec_for(const std::string &codec, int gpu);

/* A gst-launch description (a camera's own source) with each NVDEC element of another GPU than
 * @gpu replaced by the same codec's decoder of @gpu ("nvh264dec ! ..." on GPU 1:
 * "nvh264device1dec ! ..."), so that its frames are decoded where they are searched. A decoder
 * @gpu has none of stays. @moved, when given, gets "nvh264dec -> nvh264device1dec" for each. */
std::string gst_cv_nvdec_moved(const std::string &description, int gpu,
                               std::vector<std::string> *moved = nullptr);

/* The same with the registry's answers given: @device_of a factory name's GPU (-1: no NVIDIA
 * decoder), @decoder_for a codec's decoder on a GPU ("" when none), as gst_cv_nvdec_device() and
 * gst_cv_nvdec_for() give them. */
std::string gst_cv_nvdec_moved(const std::string &description, int gpu,
                               const std::function<int(const std::string &)> &device_of,
                               const std::function<std::string(const std::string &, int)> &decoder_for,
                               std::vector<std::string> *moved);
