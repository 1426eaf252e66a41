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

namespace property_value {

double number(const GValue *value) {
  switch (G_VALUE_TYPE(value)) {
    case G_TYPE_FLOAT:
      return g_value_get_float(value);
    case G_TYPE_DOUBLE:
      return g_value_get_double(value);
    default:
      return static_cast<double>(signed_number(value));
  }
}

void set_number(GValue *value, double number) {
  if (G_VALUE_TYPE(value) == G_TYPE_FLOAT)
    g_value_set_float(value, static_cast<float>(number));
  else
    g_value_set_double(value, number);
}

guint64 unsigned_number(const GValue *value) {
  switch (G_VALUE_TYPE(value)) {
    case G_TYPE_UINT:
      return g_value_get_uint(value);
    case G_TYPE_ULONG:
      return g_value_get_ulong(value);
    case G_TYPE_UINT64:
      return g_value_get_uint64(value);
    default:
      return static_cast<guint64>(signed_number(value));
  }
}

gint64 signed_number(const GValue *value) {
  switch (G_VALUE_TYPE(value)) {
    case G_TYPE_INT:
      return g_value_get_int(value);
    case G_TYPE_LONG:
      return g_value_get_long(value);
    case G_TYPE_INT64:
      return g_value_get_int64(value);
    case G_TYPE_UINT:
    case G_TYPE_ULONG:
    case G_TYPE_UINT64:
      return static_cast<gint64>(unsigned_number(value));
    default:
      g_critical("property_value: a number of type %s", G_VALUE_TYPE_NAME(value));
      return 0;
  }
}

void set_integer(GValue *value, gint64 signed_number, guint64 unsigned_number) {
  switch (G_VALUE_TYPE(value)) {
    case G_TYPE_INT:
      g_value_set_int(value, static_cast<gint>(signed_number));
      break;
    case G_TYPE_LONG:
      g_value_set_long(value, static_cast<glong>(signed_number));
      break;
    case G_TYPE_INT64:
      g_value_set_int64(value, signed_number);
      break;
    case G_TYPE_UINT:
      g_value_set_uint(value, static_cast<guint>(unsigned_number));
      break;
    case G_TYPE_ULONG:
      g_value_set_ulong(value, static_cast<gulong>(unsigned_number));
      break;
    case G_TYPE_UINT64:
      g_value_set_uint64(value, unsigned_number);
      break;
    default:
      g_critical("property_value: a number of type %s", G_VALUE_TYPE_NAME(value));
  }
}

}  // namespace property_value
