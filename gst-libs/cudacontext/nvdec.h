/* The NVDEC decoders of gst-plugins-bad's nvcodec, one element per GPU and codec (nvh264dec on
 * the first, nvh264device1dec on the second, ...; each a rank below the first's), and the GPU
 * each decodes on, so that a camera's frames are decoded on the GPU its detector runs on. */
#pragma once

#include <gst/gst.h>

#include <string>

/* The CUDA device that elements of @factory decode on (their cuda-device-id), or -1 for a
 * factory that is no NVIDIA decoder (or does not tell). Cached per factory. */
int gst_cv_nvdec_device(GstElementFactory *factory);

/* The name of the NVDEC element that decodes @codec ("h264", "h265") on @gpu; "" when there is
 * none. */
std::string gst_cv_nvdec_for(const std::string &codec, int gpu);
