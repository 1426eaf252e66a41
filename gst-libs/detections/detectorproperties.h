/* Two pairs of the settings every detector shares (GstCudaNmsDetector installs their properties
 * and keeps them): the class of the candidates it attaches with the label it announces for it,
 * and the sizes of the windows it looks for. */
#pragma once

#include <glib.h>

#include <string>

/* "label" and "class-id". */
struct DetectorClass {
  std::string label;
  gint class_id = 0;
};

/* "min-size" and "max-size": "WxH" in frame pixels, 0x0 the model's window and the frame. */
struct WindowSizes {
  gint min_width = 0, min_height = 0;
  gint max_width = 0, max_height = 0;
};

/* TRUE and *width, *height set when @text is "WxH" with W, H >= 0 and each at most G_MAXINT;
 * FALSE, and both untouched, otherwise. */
bool parse_window_size(const gchar *text, gint *width, gint *height);
