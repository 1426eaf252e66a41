// The properties every detector element shares (gst-libs/detections/detectorproperties.h), as a
// user sets them on cvdetect, cudacascade and blazeface: what reads back, and what a bad value
// leaves.
#include <gst/gst.h>
#include <gtest/gtest.h>

#include <string>

#include "gst-plugin/cv_support.h"

namespace cudanms::testing {
namespace {

std::string get_string(GstElement *element, const char *property) {
  gchar *value = nullptr;
  g_object_get(element, property, &value, NULL);
  std::string text = value ? value : "(null)";
  g_free(value);
  return text;
}

class DetectorProperties : public ::testing::TestWithParam<const char *> {
 protected:
  void SetUp() override {
    init_cv_elements_once();
    element_ = gst_element_factory_make(GetParam(), nullptr);
    ASSERT_NE(element_, nullptr) << GetParam();
    gst_object_ref_sink(element_);
  }
  void TearDown() override {
    if (element_) gst_object_unref(element_);
  }
  GstElement *element_ = nullptr;
};

TEST_P(DetectorProperties, LabelAndClassIdReadBack) {
  g_object_set(element_, "label", "pedestrian", "class-id", 7, NULL);
  EXPECT_EQ(get_string(element_, "label"), "pedestrian");
  gint class_id = -1;
  g_object_get(element_, "class-id", &class_id, NULL);
  EXPECT_EQ(class_id, 7);
  g_object_set(element_, "label", nullptr, NULL);
  EXPECT_EQ(get_string(element_, "label"), "");
}

TEST(DetectorPropertiesDefaults, BlazefaceNamesFacesTheOthersTheirModel) {
  init_cv_elements_once();
  for (const char *factory : {"cvdetect", "cudacascade", "blazeface"}) {
    GstElement *element =
        GST_ELEMENT(gst_object_ref_sink(gst_element_factory_make(factory, nullptr)));
    ASSERT_NE(element, nullptr) << factory;
    const bool blazeface = g_str_equal(factory, "blazeface");
    EXPECT_EQ(get_string(element, "label"), blazeface ? "face" : "") << factory;
    if (!blazeface) {
      EXPECT_EQ(get_string(element, "min-size"), "0x0") << factory;
    }
    gst_object_unref(element);
  }
}

class WindowSizes : public DetectorProperties {};

TEST_P(WindowSizes, ValidSizesReadBackAndBadOnesLeaveThemAsTheyWere) {
  for (const char *property : {"min-size", "max-size"}) {
    g_object_set(element_, property, "48x96", NULL);
    EXPECT_EQ(get_string(element_, property), "48x96");
    g_object_set(element_, property, "64X128", NULL);
    EXPECT_EQ(get_string(element_, property), "64x128") << property;
    for (const char *bad :
         {"", "abc", "48", "48x", "x96", "-1x5", "48x96x2", "4294967296x1", "2147483648x1"}) {
      g_object_set(element_, property, bad, NULL);
      EXPECT_EQ(get_string(element_, property), "64x128") << property << "=\"" << bad << "\"";
    }
    g_object_set(element_, property, "2147483647x0", NULL);
    EXPECT_EQ(get_string(element_, property), "2147483647x0") << property;
    g_object_set(element_, property, nullptr, NULL);  // no value: the default
    EXPECT_EQ(get_string(element_, property), "0x0") << property;
  }
}

INSTANTIATE_TEST_SUITE_P(Detectors, DetectorProperties,
                         ::testing::Values("cvdetect", "cudacascade", "blazeface"));
INSTANTIATE_TEST_SUITE_P(Detectors, WindowSizes, ::testing::Values("cvdetect", "cudacascade"));

}  // namespace
}  // namespace cudanms::testing
