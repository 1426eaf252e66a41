/* "WxH" property values of the detector elements. */
#pragma once

#include <glib.h>

/* TRUE and *width, *height set when @text is "WxH" with W, H >= 0 and each at most G_MAXINT. */
gboolean gst_cv_parse_size(const gchar *text, gint *width, gint *height);
