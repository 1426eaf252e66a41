/* Two pairs of the properties every detector shares (GstCudaNmsDetector installs and keeps
 * them): the class of the candidates it attaches with the label it announces for it, and the
 * sizes of the windows it looks for. */
#pragma once

#include <glib-object.h>

#include <string>

/* A string property's value; "" for none (NULL). */
std::string string_value(const GValue *value);

/* "label" and "class-id". */
struct DetectorClass {
  std::string label;
  gint class_id = 0;

  /* Installs both on @klass; @label_blurb says what the label is for and what an empty one means
   * (a static string). */
  static void install(GObjectClass *klass, guint label_id, guint class_id_id,
                      const gchar *label_default, const gchar *label_blurb);
  /* Sets the property of @pspec from @value, or reads it into @value; FALSE when it is not one
   * of these. */
  bool set(const GParamSpec *pspec, const GValue *value);
  bool get(const GParamSpec *pspec, GValue *value) const;
};

/* "min-size" and "max-size": "WxH" in frame pixels, 0x0 the model's window and the frame. */
struct WindowSizes {
  gint min_width = 0, min_height = 0;
  gint max_width = 0, max_height = 0;

  /* Installs both on @klass; @min_blurb says what min-size does (a static string). */
  static void install(GObjectClass *klass, guint min_id, guint max_id, const gchar *min_blurb);
  /* As DetectorClass's. A value that is not "WxH" (W, H >= 0, each at most G_MAXINT) leaves the
   * sizes as they were and sets *bad; no value (NULL) is 0x0. */
  bool set(const GParamSpec *pspec, const GValue *value, bool *bad);
  bool get(const GParamSpec *pspec, GValue *value) const;
};
