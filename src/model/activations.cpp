// Activations: two passes over the same carving code, one to count floats, one to hand out pointers.
#include "model/activations.hpp"

namespace dtrain {
namespace {

// Hands out 16-float-aligned pieces of a buffer; with a null base it only counts.
class Carver {
 public:
  explicit Carver(float* base) : base_(base) {}
  float* take(std::size_t n) {
    float* p = base_ ? base_ + used_ : nullptr;
    used_ += (n + 15) / 16 * 16;
    return p;
  }
  int* take_ints(std::size_t n) { return reinterpret_cast<int*>(take(n)); }  // int and float are both 4 bytes
  std::size_t used() const { return used_; }

 private:
  float* base_;
  std::size_t used_ = 0;
};

static_assert(sizeof(int) == sizeof(float), "token ids share the float arena");

void carve(Carver& cv, const ActivationDims& d, int blocks, bool head, int slots, std::vector<SlotActs>& out,
           Scratch& scratch) {
  const std::size_t N = static_cast<std::size_t>(d.N()), Ns = static_cast<std::size_t>(d.Ns());
  const std::size_t C = d.C, Cl = d.Cl, Fl = d.Fl, T = d.T;
  out.assign(slots, SlotActs{});
  for (auto& s : out) {
    s.tokens = cv.take_ints(N);
    s.targets = cv.take_ints(N);
    s.stage_input = cv.take(Ns * C);
    s.grad_out = cv.take(Ns * C);
    s.blocks.resize(blocks);
    for (auto& b : s.blocks) {
      b.ln1_mean = cv.take(Ns);
      b.ln1_rstd = cv.take(Ns);
      b.ln1 = cv.take(N * C);
      b.qkv = cv.take(N * 3 * Cl);
      b.atty = cv.take(N * Cl);
      b.att = cv.take(static_cast<std::size_t>(d.B) * d.NHl * T * T);
      b.res1 = cv.take(Ns * C);
      b.ln2_mean = cv.take(Ns);
      b.ln2_rstd = cv.take(Ns);
      b.ln2 = cv.take(N * C);
      b.fch = cv.take(N * Fl);
      b.fch_gelu = cv.take(N * Fl);
      b.res2 = cv.take(Ns * C);
    }
    if (head) {
      s.lnf_mean = cv.take(Ns);
      s.lnf_rstd = cv.take(Ns);
      s.lnf = cv.take(N * C);
      s.logits = cv.take(N * d.Vl);
      s.row_max = cv.take(N);
      s.row_sum = cv.take(N);
      s.lse = cv.take(N);
      s.target_logit = cv.take(N);
    }
  }
  scratch.dres = cv.take(Ns * C);
  scratch.rows_full = cv.take(N * C);
  scratch.rows_shard = cv.take(Ns * C);
  scratch.dln = cv.take(N * C);
  scratch.datty = cv.take(N * Cl);
  scratch.dqkv = cv.take(N * 3 * Cl);
  scratch.dfch = cv.take(N * Fl);
  scratch.dfch2 = cv.take(N * Fl);
  scratch.dtt = cv.take(T * T);
  scratch.dloss = cv.take(N);
}

}  // namespace

Activations::Activations(const ActivationDims& dims, int num_blocks, bool head, int slots) : dims_(dims) {
  Carver count(nullptr);
  carve(count, dims, num_blocks, head, slots, slots_, scratch_);
  arena_ = Arena(count.used());
  Carver real(arena_.data());
  carve(real, dims, num_blocks, head, slots, slots_, scratch_);
}

}  // namespace dtrain
