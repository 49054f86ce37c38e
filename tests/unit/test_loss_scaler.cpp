// LossScaler against Megatron's DynamicGradScaler rule, stepped by hand: an overflow resets the growth
// count and uses one unit of hysteresis, the scale halves once none is left (and on every further
// overflow until the next growth), never below min_loss_scale; loss_scale_window clean steps double it
// and restore the hysteresis. The scales are powers of two times the initial one: exact comparisons.
#include <catch2/catch.hpp>

#include <limits>

#include "common/error.hpp"
#include "optim/loss_scaler.hpp"

using namespace dtrain;

namespace {

OptimizerConfig dynamic(double initial, int window, int hysteresis, double min_scale = 1.0) {
  OptimizerConfig o;
  o.initial_loss_scale = initial;
  o.loss_scale_window = window;
  o.hysteresis = hysteresis;
  o.min_loss_scale = min_scale;
  return o;
}

}  // namespace

TEST_CASE("dynamic loss scaling: growth after the window, halving after the hysteresis", "[loss_scale]") {
  LossScaler s(dynamic(1024, 3, 2));
  CHECK(s.scale() == 1024);
  s.update(false), s.update(false);
  CHECK(s.scale() == 1024);
  s.update(false);  // the third clean step in a row
  CHECK(s.scale() == 2048);
  CHECK(s.state().growth_tracker == 0);
  s.update(true);  // the first overflow uses up one unit of hysteresis: no halving
  CHECK(s.scale() == 2048);
  CHECK(s.state().hysteresis_tracker == 1);
  s.update(false), s.update(false);
  s.update(true);  // the second: halves, and the two clean steps before it no longer count
  CHECK(s.scale() == 1024);
  CHECK(s.state().growth_tracker == 0);
  s.update(true);  // with the hysteresis spent, every overflow halves until the next growth
  CHECK(s.scale() == 512);
  CHECK(s.state().hysteresis_tracker == -1);
  s.update(false), s.update(false), s.update(false);
  CHECK(s.scale() == 1024);
  CHECK(s.state().hysteresis_tracker == 2);  // restored by the growth
  s.update(true);
  CHECK(s.scale() == 1024);
}

TEST_CASE("dynamic loss scaling: hysteresis 1 halves at once, never below the minimum", "[loss_scale]") {
  LossScaler s(dynamic(8, 1000, 1, 2));
  s.update(true);
  CHECK(s.scale() == 4);
  s.update(true);
  CHECK(s.scale() == 2);
  s.update(true);
  CHECK(s.scale() == 2);  // min_loss_scale
}

TEST_CASE("a fixed loss scale never changes", "[loss_scale]") {
  OptimizerConfig o = dynamic(1024, 1, 1);
  o.loss_scale = 128;
  LossScaler s(o);
  CHECK(s.scale() == 128);
  s.update(true), s.update(false), s.update(true);
  CHECK(s.scale() == 128);
}

TEST_CASE("a restored scaler goes on from the saved state, within the configuration's bounds", "[loss_scale]") {
  LossScaler s(dynamic(1024, 3, 2));
  s.restore({64, 2, -1}, "test");
  CHECK(s.scale() == 64);
  s.update(false);  // the saved growth count was 2 of 3
  CHECK(s.scale() == 128);
  LossScaler shorter(dynamic(1024, 2, 1));
  shorter.restore({64, 5, 2}, "test");  // saved under a longer window and more hysteresis
  CHECK(shorter.state().growth_tracker == 1);
  CHECK(shorter.state().hysteresis_tracker == 1);
  shorter.update(false);
  CHECK(shorter.scale() == 128);
  CHECK_THROWS_AS(s.restore({0.0, 0, 1}, "test"), UserError);
  CHECK_THROWS_AS(s.restore({std::numeric_limits<double>::infinity(), 0, 1}, "test"), UserError);
  CHECK_THROWS_AS(s.restore({64, -1, 1}, "test"), UserError);
}
