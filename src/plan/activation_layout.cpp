// carve_activations: the one description of the activation arena's layout.
#include "plan/activation_layout.hpp"

namespace dtrain {
namespace {

// Hands out 16-float-aligned pieces of a buffer; with a null base it only counts. Counts saturate
// instead of wrapping, so an absurd configuration shows as an absurd size (and is refused).
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  float* take(std::size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    const std::size_t rounded = n > kMax - 15 ? kMax : (n + 15) / 16 * 16;
    used_ = used_ > kMax - rounded ? kMax : used_ + rounded;
    return p;
  }
  std::size_t used() const { return used_; }

 private:
  static constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 2;
  float* base_;
  std::size_t used_ = 0;
};

// a * b, saturating like the carver.
std::size_t mul(std::size_t a, std::size_t b) {
  constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 2;
  return a != 0 && b > kMax / a ? kMax : a * b;
}

}  // namespace

std::size_t carve_activations(float* base, const ActivationLayout& layout, std::vector<SlotActs>& out, Scratch& scratch) {
  const ActivationDims& d = layout.dims;
  const std::size_t N = static_cast<std::size_t>(d.N()), Ns = static_cast<std::size_t>(d.Ns());
  const std::size_t C = d.C, Cl = d.Cl, Fl = d.Fl, T = d.T;
  Carver cv(base);
  out.assign(static_cast<std::size_t>(layout.slots), SlotActs{});
  for (auto& s : out) {
    s.stage_input = cv.take(mul(Ns, C));
    s.blocks.resize(static_cast<std::size_t>(layout.blocks_per_slot));
    for (auto& b : s.blocks) {
      b.ln1_mean = cv.take(Ns);
      b.ln1_rstd = cv.take(Ns);
      b.ln1 = cv.take(mul(N, C));
      b.qkv = cv.take(mul(N, 3 * Cl));
      b.atty = cv.take(mul(N, Cl));
      b.att = cv.take(mul(mul(static_cast<std::size_t>(d.B) * d.NHl, T), T));
      b.res1 = cv.take(mul(Ns, C));
      b.ln2_mean = cv.take(Ns);
      b.ln2_rstd = cv.take(Ns);
      b.ln2 = cv.take(mul(N, C));
      b.fch = cv.take(mul(N, Fl));
      b.fch_gelu = cv.take(mul(N, Fl));
      b.res2 = cv.take(mul(Ns, C));
    }
    if (layout.head) {
      s.lnf_mean = cv.take(Ns);
      s.lnf_rstd = cv.take(Ns);
      s.lnf = cv.take(mul(N, C));
      s.logits = cv.take(mul(N, d.Vl));
      s.row_max = cv.take(N);
      s.row_sum = cv.take(N);
      s.lse = cv.take(N);
      s.target_logit = cv.take(N);
    }
  }
  scratch.dres = cv.take(mul(Ns, C));
  scratch.rows_full = cv.take(mul(N, C));
  scratch.rows_shard = cv.take(mul(Ns, C));
  scratch.dln = cv.take(mul(N, C));
  scratch.datty = cv.take(mul(N, Cl));
  scratch.dqkv = cv.take(mul(N, 3 * Cl));
  scratch.dfch = cv.take(mul(N, Fl));
  scratch.dfch2 = cv.take(mul(N, Fl));
  scratch.dtt = cv.take(mul(T, T));
  scratch.dloss = cv.take(N);
  return cv.used();
}

std::size_t ActivationLayout::floats() const {
  std::vector<SlotActs> slots_out;
  Scratch scratch{};
  ActivationLayout counting = *this;
  // Counting needs the per-slot structure only once: every slot has the same size.
  counting.slots = slots > 0 ? 1 : 0;
  const std::size_t one = carve_activations(nullptr, counting, slots_out, scratch);
  counting.slots = 0;
  const std::size_t shared = carve_activations(nullptr, counting, slots_out, scratch);
  const std::size_t per_slot = one - shared;
  constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 2;
  const std::size_t all = mul(per_slot, static_cast<std::size_t>(slots));
  return all > kMax - shared ? kMax : all + shared;
}

}  // namespace dtrain
