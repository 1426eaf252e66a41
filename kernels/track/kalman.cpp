#include "kalman.h"

namespace cudanms::track {
namespace {

constexpr double kPositionWeight = 1.0 / 20;
constexpr double kVelocityWeight = 1.0 / 160;

double square(double v) { return v * v; }

}  // namespace

BoxKalman::BoxKalman(const Measurement &m) {
  const double h = m.height;
  const double values[4] = {m.cx, m.cy, m.aspect, m.height};
  const double value_sd[4] = {2 * kPositionWeight * h, 2 * kPositionWeight * h, 1e-2,
                              2 * kPositionWeight * h};
  const double velocity_sd[4] = {10 * kVelocityWeight * h, 10 * kVelocityWeight * h, 1e-5,
                                 10 * kVelocityWeight * h};
  for (int k = 0; k < 4; ++k)
    coords_[k] = {values[k], 0.0, square(value_sd[k]), 0.0, square(velocity_sd[k])};
}

void BoxKalman::predict() {
  const double h = coords_[3].value;
  const double value_sd[4] = {kPositionWeight * h, kPositionWeight * h, 1e-2, kPositionWeight * h};
  const double velocity_sd[4] = {kVelocityWeight * h, kVelocityWeight * h, 1e-5,
                                 kVelocityWeight * h};
  for (int k = 0; k < 4; ++k) {
    Coordinate &c = coords_[k];
    c.value += c.velocity;
    // P = F P F^T + Q, F = [1 1; 0 1].
    c.var_value += 2 * c.covar + c.var_velocity + square(value_sd[k]);
    c.covar += c.var_velocity;
    c.var_velocity += square(velocity_sd[k]);
  }
}

void BoxKalman::move(double scale, double dx, double dy) {
  const double shift[4] = {dx, dy, 0, 0};
  for (int k : {0, 1, 3}) {
    Coordinate &c = coords_[k];
    c.value = scale * c.value + shift[k];
    c.velocity *= scale;
    c.var_value *= scale * scale;
    c.covar *= scale * scale;
    c.var_velocity *= scale * scale;
  }
}

void BoxKalman::update(const Measurement &m) {
  const double h = coords_[3].value;
  const double measured[4] = {m.cx, m.cy, m.aspect, m.height};
  const double noise_sd[4] = {kPositionWeight * h, kPositionWeight * h,
                              kPositionWeight * coords_[2].value, kPositionWeight * h};
  for (int k = 0; k < 4; ++k) {
    Coordinate &c = coords_[k];
    const double s = c.var_value + square(noise_sd[k]);  // the innovation's variance
    const double gain_value = c.var_value / s, gain_velocity = c.covar / s;
    const double innovation = measured[k] - c.value;
    c.value += gain_value * innovation;
    c.velocity += gain_velocity * innovation;
    // P -= K S K^T.
    c.var_velocity -= c.covar * gain_velocity;
    c.covar -= c.var_value * gain_velocity;
    c.var_value -= c.var_value * gain_value;
  }
}

}  // namespace cudanms::track
