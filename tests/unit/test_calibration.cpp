// dtrain calibrate's fits (plan/calibration) and dtrain plan --layout's parsing (plan/layout_spec).
// Tolerances: the fits are least squares of two or three unknowns on samples made exactly by the model
// they fit; the normal equations' condition (sizes from 1e3 to 4e6 bytes) is below 1e8, so a fit
// recovers its parameters to ~1e8 x 1e-16 = 1e-8 relative: epsilon 1e-6; Approx() elsewhere as in
// the cost model's tests (double formulas on exact inputs).
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "plan/calibration.hpp"
#include "plan/layout_spec.hpp"

using namespace dtrain;

TEST_CASE("the efficiency table is each GEMM's rate over the fastest, ascending, equal FLOPs averaged") {
  // Rates: 1e6 FLOPs in 1e-4 s = 1e10 FLOP/s; 1e9 in 1e-2 s = 1e11 (the peak); 1e6 again in 2e-4 s = 5e9.
  const std::vector<GemmSample> s{{1e9, 1e-2}, {1e6, 1e-4}, {1e6, 2e-4}};
  const double peak = peak_rate(s);
  CHECK(peak == Approx(1e11));
  const auto t = efficiency_table(s, peak);
  REQUIRE(t.size() == 2);
  CHECK(t[0].first == 1e6);
  CHECK(t[0].second == Approx((0.1 + 0.05) / 2));
  CHECK(t[1].first == 1e9);
  CHECK(t[1].second == Approx(1.0));
}

TEST_CASE("the efficiency per width keeps each width's samples apart") {
  // 1e6 FLOPs at width 16 runs at 1e10 FLOP/s, at width 64 at 5e10; 1e9 FLOPs at width 64 is the peak,
  // 1e11. One curve averages the two 1e6 samples (0.3); per width they stay 0.1 and 0.5.
  const std::vector<GemmSample> s{{1e6, 2e-5, 64}, {1e9, 1e-2, 64}, {1e6, 1e-4, 16}};
  const auto curves = efficiency_by_width(s, peak_rate(s));
  REQUIRE(curves.size() == 2);
  CHECK(curves[0].first == 16);
  REQUIRE(curves[0].second.size() == 1);
  CHECK(curves[0].second[0].first == 1e6);
  CHECK(curves[0].second[0].second == Approx(0.1));
  CHECK(curves[1].first == 64);
  REQUIRE(curves[1].second.size() == 2);
  CHECK(curves[1].second[0].second == Approx(0.5));
  CHECK(curves[1].second[1].second == Approx(1.0));
  CHECK(efficiency_table(s, peak_rate(s))[0].second == Approx(0.3));
}

TEST_CASE("fit_link recovers the bandwidth and latency the ring formulas were timed with") {
  const Link truth{4e9, 2e-6};
  std::vector<CommSample> s;
  for (double bytes : {1e3, 1e5, 4e6})
    for (long n : {2L, 4L})
      for (auto op : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather, Collective::send_recv,
                      Collective::all_to_all}) {
        CommSample c{op, bytes, n, 0};
        c.seconds = model_seconds(c, truth);
        s.push_back(c);
      }
  const Link fit = fit_link(s);
  CHECK(fit.bandwidth == Approx(truth.bandwidth).epsilon(1e-6));
  CHECK(fit.latency == Approx(truth.latency).epsilon(1e-6));
  CHECK(fit.all_reduce_rate() == Approx(truth.bandwidth).epsilon(1e-6));
  CHECK(fit.reduce_scatter_rate() == Approx(truth.bandwidth).epsilon(1e-6));
  // all-reduce of 1 MB on 2 ranks: 2 * 1/2 * 1e6 / 4e9 + 2 * 2e-6 = 2.5e-4 + 4e-6.
  CHECK(model_seconds({Collective::all_reduce, 1e6, 2, 0}, truth) == Approx(2.54e-4));
}

TEST_CASE("fit_link gives all-reduce and reduce-scatter their own bandwidths when they were slower than the ring") {
  const Link truth{4e9, 2e-6, 1e9, 5e8};  // an MPI summing at a quarter of the link's rate, reduce-scatter at an eighth
  std::vector<CommSample> s;
  for (double bytes : {1e3, 1e5, 4e6})
    for (auto op : {Collective::all_reduce, Collective::reduce_scatter, Collective::all_gather, Collective::send_recv}) {
      CommSample c{op, bytes, 2, 0};
      c.seconds = model_seconds(c, truth);
      s.push_back(c);
    }
  const Link fit = fit_link(s);
  CHECK(fit.bandwidth == Approx(4e9).epsilon(1e-6));
  CHECK(fit.latency == Approx(2e-6).epsilon(1e-6));
  CHECK(fit.all_reduce_bandwidth == Approx(1e9).epsilon(1e-6));
  CHECK(fit.reduce_scatter_bandwidth == Approx(5e8).epsilon(1e-6));
  // Only all-reduces timed: they are the link.
  std::vector<CommSample> only;
  for (const auto& c : s)
    if (c.op == Collective::all_reduce) only.push_back(c);
  CHECK(fit_link(only).bandwidth == Approx(1e9).epsilon(1e-6));
}

TEST_CASE("fit_link measures a reduction that ran faster than the link's latency allows (a loaded machine's noise)") {
  // The other collectives met a 1 ms latency; the all-reduces took no latency at 2 GB/s, less time than
  // the link's latency alone: their bandwidth is fitted without it, not left out.
  std::vector<CommSample> s;
  for (double bytes : {1e3, 1e5, 4e6}) {
    for (auto op : {Collective::all_gather, Collective::send_recv}) {
      CommSample c{op, bytes, 2, 0};
      c.seconds = model_seconds(c, {4e9, 1e-3});
      s.push_back(c);
    }
    CommSample c{Collective::all_reduce, bytes, 2, 0};
    c.seconds = model_seconds(c, {2e9, 0.0});
    s.push_back(c);
  }
  const Link fit = fit_link(s);
  CHECK(fit.latency == Approx(1e-3).epsilon(1e-6));
  CHECK(fit.all_reduce_bandwidth == Approx(2e9).epsilon(1e-6));
  CHECK(fit.reduce_scatter_bandwidth == 0);  // none timed: the link's own rate stands for it
}

TEST_CASE("fit_link holds the latency at zero rather than below it, and refuses timings without a bandwidth") {
  // Small messages slower than the line through large ones would allow a negative latency.
  const std::vector<CommSample> s{{Collective::send_recv, 1e6, 2, 1e-3}, {Collective::send_recv, 2e6, 2, 3e-3}};
  const Link fit = fit_link(s);
  CHECK(fit.latency >= 0);
  CHECK(fit.bandwidth > 0);
  CHECK_THROWS_AS(fit_link({}), UserError);
}

TEST_CASE("--layout sets the keys it names over the base layout") {
  Layout base;
  base.micro_batch = 4;
  const Layout l = parse_layout("tp=2,pp=2,dp=3,mb=1,recompute=selective,zero=2,v=2,sp=1", base);
  CHECK(l.sizes.tp == 2);
  CHECK(l.sizes.pp == 2);
  CHECK(l.sizes.dp == 3);
  CHECK(l.sizes.cp == 1);
  CHECK(l.sizes.v == 2);
  CHECK(l.micro_batch == 1);
  CHECK(l.recompute == RecomputeGranularity::selective);
  CHECK(l.sizes.distributed_optimizer());
  CHECK(l.sizes.zero == 2);
  CHECK(l.sequence_parallel);
  const Layout kept = parse_layout("dp=2,zero=0", base);
  CHECK(kept.micro_batch == 4);
  CHECK_FALSE(kept.sizes.distributed_optimizer());
  CHECK_FALSE(parse_layout("sp=1", base).sequence_parallel);  // no sequence parallelism without tp
}

TEST_CASE("--layout refuses unknown keys, bad numbers and empty text with the accepted keys") {
  const Layout base;
  for (const char* bad : {"tq=2", "tp=0", "tp=two", "tp", "mb=", "zero=4", "recompute=some", ""}) {
    INFO(bad);
    CHECK_THROWS_AS(parse_layout(bad, base), UserError);
  }
  CHECK_THROWS_WITH(parse_layout("tq=2", base), Catch::Contains("unknown key 'tq'") && Catch::Contains("keys: tp, pp"));
}
