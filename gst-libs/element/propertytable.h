/* An element's properties as one table (docs/architecture.md, "An element's properties"): each
 * row a GParamSpec and where its value lives in the element's state, a field of it (read and
 * written through the spec's value type) or a setter and a getter where a value does more than
 * sit in a field. The table installs each row on the element's class and answers
 * set_property and get_property for it, under the state's lock, so that no element writes the
 * enum, the install calls and the two switches of GObject's idiom again.
 *
 *   PropertyTable<BoxCountSettings>(gobject_class, settings_of)
 *       .field(g_param_spec_double("hysteresis", ...), &BoxCountSettings::hysteresis)
 *       .read_only(g_param_spec_uint64("frames", ...),
 *                  [](const BoxCountSettings &s, GValue *value) { ... });
 *
 * State is what the rows read and write, found on the object with the lock that guards it
 * (settings_of). Rows live as long as the class, that is for the process: GObject never frees a
 * class. Several tables may fill one class (a subclass's and its parent's, the settings' and the
 * running figures'): each row answers for itself. */
#pragma once

#include <glib-object.h>

#include <functional>
#include <mutex>
#include <string>
#include <type_traits>

/* A string property's value; "" for none (NULL). */
std::string string_value(const GValue *value);

/* One property of a class: how it is set and read on an object. */
class PropertyRow {
 public:
  virtual ~PropertyRow() = default;
  virtual void set(GObject *object, GParamSpec *pspec, const GValue *value) const = 0;
  virtual void get(GObject *object, GValue *value) const = 0;
};

/* Installs @pspec on @klass, answered by @row; @klass's set_property and get_property become the
 * tables' (which find the row from the GParamSpec). */
void property_row_install(GObjectClass *klass, GParamSpec *pspec, const PropertyRow *row);

/* A field's value from a GValue of its property's type, and back: strings, booleans, enums, and
 * numbers of any width (a float field of a double property, a size_t of a guint ...), which
 * GLib's own transforms between numeric types convert. */
namespace property_value {

/* The widest GType of a field's kind of number. */
template <typename T>
GType number_type() {
  if constexpr (std::is_floating_point_v<T>) return G_TYPE_DOUBLE;
  if constexpr (std::is_signed_v<T>) return G_TYPE_INT64;
  return G_TYPE_UINT64;
}

template <typename T>
void read(const GValue *value, T *field) {
  if constexpr (std::is_same_v<T, std::string>) {
    *field = string_value(value);
  } else if constexpr (std::is_same_v<T, bool>) {
    *field = g_value_get_boolean(value);
  } else if constexpr (std::is_enum_v<T>) {
    *field = static_cast<T>(g_value_get_enum(value));
  } else {
    static_assert(std::is_arithmetic_v<T>, "a field of a type a property does not hold");
    GValue number = G_VALUE_INIT;
    g_value_init(&number, number_type<T>());
    g_value_transform(value, &number);
    if constexpr (std::is_floating_point_v<T>)
      *field = static_cast<T>(g_value_get_double(&number));
    else if constexpr (std::is_signed_v<T>)
      *field = static_cast<T>(g_value_get_int64(&number));
    else
      *field = static_cast<T>(g_value_get_uint64(&number));
  }
}

template <typename T>
void write(const T &field, GValue *value) {
  if constexpr (std::is_same_v<T, std::string>) {
    g_value_set_string(value, field.c_str());
  } else if constexpr (std::is_same_v<T, bool>) {
    g_value_set_boolean(value, field);
  } else if constexpr (std::is_enum_v<T>) {
    g_value_set_enum(value, static_cast<gint>(field));
  } else {
    GValue number = G_VALUE_INIT;
    g_value_init(&number, number_type<T>());
    if constexpr (std::is_floating_point_v<T>)
      g_value_set_double(&number, field);
    else if constexpr (std::is_signed_v<T>)
      g_value_set_int64(&number, field);
    else
      g_value_set_uint64(&number, field);
    g_value_transform(&number, value);
  }
}

}  // namespace property_value

/* The state of an object that rows read and write, and the lock that guards it. */
template <typename State>
struct Locked {
  State *state;
  std::mutex *lock;
};

/* The lock an instance keeps in its `priv`. */
template <typename Instance>
std::mutex *own_lock(GObject *object) {
  return &reinterpret_cast<Instance *>(object)->priv->lock;
}

/* The StateOf of an element whose instance holds `priv`, a struct with its `lock`:
 * PropertyTable<GstBoxCountPrivate>(klass, locked_private<GstBoxCount>). */
template <typename Instance>
auto locked_private(GObject *object) {
  auto *priv = reinterpret_cast<Instance *>(object)->priv;
  return Locked<std::remove_pointer_t<decltype(priv)>>{priv, own_lock<Instance>(object)};
}

/* The StateOf of an element whose `priv` keeps the state in a member, guarded by the lock that
 * `lock_of` finds: its own `priv->lock`, or another's (a detector's, its base's):
 *   locked_member<GstBoxCount, &GstBoxCountPrivate::settings>
 *   locked_member<GstCvDetect, &GstCvDetectPrivate::settings, gst_cuda_nms_detector_mutex> */
template <typename Instance, auto member, std::mutex *(*lock_of)(GObject *) = own_lock<Instance>>
auto locked_member(GObject *object) {
  auto *priv = reinterpret_cast<Instance *>(object)->priv;
  return Locked<std::remove_reference_t<decltype(priv->*member)>>{&(priv->*member),
                                                                  lock_of(object)};
}

template <typename State>
class PropertyTable {
 public:
  using StateOf = Locked<State> (*)(GObject *object);
  using Setter = std::function<void(State &, const GValue *)>;
  using Getter = std::function<void(const State &, GValue *)>;
  /* Hooks of the whole table: `touched` after any of its rows was set, under the lock (what the
   * settings feed, made again); `changed` after that, the lock released (posting a message). */
  using Touched = void (*)(State &state);
  using Changed = void (*)(GObject *object, GParamSpec *pspec);

  /* The table lives in class_init; its rows, with these, for the process. */
  PropertyTable(GObjectClass *klass, StateOf state_of, Touched touched = nullptr,
                Changed changed = nullptr)
      : klass_(klass), hooks_{state_of, touched, changed} {}

  /* A row kept in a field of the state: a member (&Settings::threshold) or, deeper in it, the
   * field a lambda returns ([](auto &s) -> auto & { return s.params.threshold; }, one lambda for
   * both ways, the state const or not). */
  template <typename Field>
  PropertyTable &field(GParamSpec *pspec, Field field) {
    return row(pspec, setter(field), getter(field));
  }

  /* field()'s two halves, for a row that does more on one side. */
  template <typename Field>
  static Setter setter(Field field) {
    return [field](State &s, const GValue *value) {
      property_value::read(value, &std::invoke(field, s));
    };
  }
  template <typename Field>
  static Getter getter(Field field) {
    return [field](const State &s, GValue *value) {
      property_value::write(std::invoke(field, s), value);
    };
  }

  /* A row with its own setter (under the lock) and getter. */
  PropertyTable &row(GParamSpec *pspec, Setter set, Getter get) {
    property_row_install(klass_, pspec, new Row(hooks_, std::move(set), std::move(get)));
    return *this;
  }

  PropertyTable &read_only(GParamSpec *pspec, Getter get) { return row(pspec, nullptr, get); }

 private:
  struct Hooks {
    StateOf state_of;
    Touched touched;
    Changed changed;
  };

  class Row : public PropertyRow {
   public:
    Row(const Hooks &hooks, Setter set, Getter get)
        : hooks_(hooks), set_(std::move(set)), get_(std::move(get)) {}
    void set(GObject *object, GParamSpec *pspec, const GValue *value) const override {
      const Locked<State> s = hooks_.state_of(object);
      {
        std::lock_guard<std::mutex> guard(*s.lock);
        set_(*s.state, value);
        if (hooks_.touched) hooks_.touched(*s.state);
      }
      if (hooks_.changed) hooks_.changed(object, pspec);
    }
    void get(GObject *object, GValue *value) const override {
      const Locked<State> s = hooks_.state_of(object);
      std::lock_guard<std::mutex> guard(*s.lock);
      get_(*s.state, value);
    }

   private:
    const Hooks hooks_;
    const Setter set_;
    const Getter get_;
  };

  GObjectClass *klass_;
  const Hooks hooks_;
};
