#include "propertytable.h"

namespace {

GQuark row_quark() {
  static const GQuark quark = g_quark_from_static_string("cudanms-property-row");
  return quark;
}

const PropertyRow *row_of(GParamSpec *pspec) {
  return static_cast<const PropertyRow *>(g_param_spec_get_qdata(pspec, row_quark()));
}

/* Every table's class answers through these: the row hangs on the GParamSpec, so that a
 * subclass's rows and its parent's are found alike whichever class installed them. */
void set_property(GObject *object, guint prop_id, const GValue *value, GParamSpec *pspec) {
  if (const PropertyRow *row = row_of(pspec))
    row->set(object, pspec, value);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

void get_property(GObject *object, guint prop_id, GValue *value, GParamSpec *pspec) {
  if (const PropertyRow *row = row_of(pspec))
    row->get(object, value);
  else
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, prop_id, pspec);
}

}  // namespace

std::string string_value(const GValue *value) {
  const gchar *text = g_value_get_string(value);
  return text ? text : "";
}

void property_row_install(GObjectClass *klass, GParamSpec *pspec, const PropertyRow *row) {
  /* GObject only hands the id back, and the rows are found from the GParamSpec: a count serves. */
  static guint next_id = 1;
  g_param_spec_set_qdata(pspec, row_quark(), const_cast<PropertyRow *>(row));
  klass->set_property = set_property;
  klass->get_property = get_property;
  g_object_class_install_property(klass, next_id++, pspec);
}
