// carve_activations: the one description of the activation arena's layout.
#include "plan/activation_layout.hpp"

#include <algorithm>

#include "common/storage_type.hpp"
#include "kernels/attention_scratch.hpp"

namespace dtrain {
namespace {

constexpr std::size_t kMax = static_cast<std::size_t>(-1) / 2;

// a * b, saturating: an absurd configuration shows as an absurd size (and is refused), never wraps.
std::size_t mul(std::size_t a, std::size_t b) { return a != 0 && b > kMax / a ? kMax : a * b; }

// Hands out 64-byte-aligned pieces of a buffer; with a null base it only counts.
class Carver {
 public:
  explicit Carver(void* base) : base_(static_cast<char*>(base)) {}
  template <typename U>
  U* take(std::size_t n) {
    U* p = base_ ? reinterpret_cast<U*>(base_ + used_) : nullptr;
    const std::size_t bytes = mul(n, sizeof(U));
    const std::size_t rounded = bytes > kMax - 63 ? kMax : (bytes + 63) / 64 * 64;
    used_ = used_ > kMax - rounded ? kMax : used_ + rounded;
    return p;
  }
  std::size_t used() const { return used_; }
  char* here() const { return base_ ? base_ + used_ : nullptr; }

 private:
  char* base_;
  std::size_t used_ = 0;
};

}  // namespace

std::vector<std::pair<int, int>> ActivationLayout::recompute_groups() const {
  std::vector<std::pair<int, int>> groups;
  if (recompute != RecomputeGranularity::full) return groups;
  const int g = recompute_layers < 1 ? 1 : recompute_layers;
  if (recompute_method == RecomputeMethod::block) {
    for (int i = 0; i < blocks_per_slot && i < g; ++i) groups.emplace_back(i, i + 1);
  } else {
    for (int i = 0; i < blocks_per_slot; i += g) groups.emplace_back(i, i + g < blocks_per_slot ? i + g : blocks_per_slot);
  }
  return groups;
}

unsigned char ActivationLayout::mlp_kind(int position) const {
  return mlp_kinds.empty() ? kDenseMlp : mlp_kinds[static_cast<std::size_t>(position)];
}

namespace {

// What a MoE block keeps (MoE activations are never recomputed selectively).
template <typename T>
void take_moe(Carver& cv, const ActivationDims& d, MoeActs<T>& m) {
  const std::size_t N = static_cast<std::size_t>(d.N()), R = static_cast<std::size_t>(d.R());
  const std::size_t E = d.E, K = d.K, C = d.C;
  m.probs = cv.take<float>(mul(N, E));
  m.idx = cv.take<int>(mul(N, K));
  m.w = cv.take<float>(mul(N, K));
  m.pos = cv.take<int>(mul(N, K));
  m.src = cv.take<int>(R);
  m.row_w = cv.take<float>(R);
  const std::size_t Re = static_cast<std::size_t>(d.Re());
  m.xin = cv.take<T>(mul(R, C));
  m.fch = cv.take<T>(mul(Re, static_cast<std::size_t>(d.He())));
  m.act = cv.take<T>(mul(Re, static_cast<std::size_t>(d.Fe)));
  m.out = cv.take<float>(mul(Re, C));
  m.y = d.ep > 1 ? cv.take<float>(mul(R, C)) : m.out;
}

template <typename T>
void take_moe_scratch(Carver& cv, const ActivationDims& d, MoeScratch<T>& m) {
  const std::size_t N = static_cast<std::size_t>(d.N()), R = static_cast<std::size_t>(d.R());
  const std::size_t E = d.E, K = d.K, C = d.C;
  const bool wide = !std::is_same_v<T, float>;
  m.logits = cv.take<float>(mul(N, E));
  m.dw = cv.take<float>(mul(N, K));
  m.daux = cv.take<float>(E);
  m.x32 = wide ? cv.take<float>(mul(N, C)) : nullptr;
  m.w32 = wide ? cv.take<float>(mul(E, C)) : nullptr;
  const std::size_t Re = static_cast<std::size_t>(d.Re());
  m.drows = cv.take<T>(mul(R, C));
  m.dact = cv.take<T>(mul(Re, static_cast<std::size_t>(d.Fe)));
  m.dfch = cv.take<T>(mul(Re, static_cast<std::size_t>(d.He())));
  m.dxin = cv.take<float>(mul(Re, C));
  m.xe = d.ep > 1 ? cv.take<T>(mul(Re, C)) : nullptr;
  m.de = d.ep > 1 ? cv.take<T>(mul(Re, C)) : nullptr;
  m.dxt = d.ep > 1 ? cv.take<float>(mul(R, C)) : nullptr;
}

// Every tensor of one block; `act` = false leaves the MLP activation to the selective scratch; `kinds`
// says which MLP's tensors (dense, MoE or both).
template <typename T>
void take_block(Carver& cv, const ActivationDims& d, BlockActs<T>& b, bool act, unsigned char kinds, bool qk_norm) {
  const std::size_t N = static_cast<std::size_t>(d.N()), Ns = static_cast<std::size_t>(d.Ns());
  const std::size_t C = d.C, Tn = d.T;
  b.ln1_mean = cv.take<float>(Ns);
  b.ln1_rstd = cv.take<float>(Ns);
  b.ln1 = cv.take<T>(mul(N, C));
  b.qkv = cv.take<T>(mul(N, static_cast<std::size_t>(d.QKVl())));
  const std::size_t HD = static_cast<std::size_t>(d.HD());
  b.q_raw = qk_norm ? cv.take<T>(mul(N, d.NHl * HD)) : nullptr;
  b.k_raw = qk_norm ? cv.take<T>(mul(N, d.NKVl * HD)) : nullptr;
  b.q_rstd = qk_norm ? cv.take<float>(mul(N, static_cast<std::size_t>(d.NHl))) : nullptr;
  b.k_rstd = qk_norm ? cv.take<float>(mul(N, static_cast<std::size_t>(d.NKVl))) : nullptr;
  b.atty = cv.take<T>(mul(N, static_cast<std::size_t>(d.Cl)));
  b.lse = cv.take<float>(mul(static_cast<std::size_t>(d.B) * d.NHl, Tn));
  b.res1 = cv.take<T>(mul(Ns, C));
  b.ln2_mean = cv.take<float>(Ns);
  b.ln2_rstd = cv.take<float>(Ns);
  b.ln2 = cv.take<T>(mul(N, C));
  const bool dense = kinds & kDenseMlp;
  b.fch = dense ? cv.take<T>(mul(N, static_cast<std::size_t>(d.Hl()))) : nullptr;
  b.fch_gelu = dense && act ? cv.take<T>(mul(N, static_cast<std::size_t>(d.Fl))) : nullptr;
  b.res2 = cv.take<T>(mul(Ns, C));
  if (kinds & kMoeMlp) take_moe(cv, d, b.moe);
}

}  // namespace

template <typename T>
std::size_t carve_activations(void* base, const ActivationLayout& layout, std::vector<SlotActs<T>>& out, Scratch<T>& scratch) {
  const ActivationDims& d = layout.dims;
  const std::size_t N = static_cast<std::size_t>(d.N()), Ns = static_cast<std::size_t>(d.Ns());
  const std::size_t C = d.C, Cl = d.Cl, Fl = d.Fl, Tn = d.T;
  const bool selective = layout.recompute == RecomputeGranularity::selective;
  const auto groups = layout.recompute_groups();
  // group_of[i]: the full recomputation group holding block i (-1: none).
  std::vector<int> group_of(static_cast<std::size_t>(layout.blocks_per_slot), -1);
  int replay_blocks = 0;
  for (std::size_t k = 0; k < groups.size(); ++k) {
    for (int i = groups[k].first; i < groups[k].second; ++i) group_of[static_cast<std::size_t>(i)] = static_cast<int>(k);
    replay_blocks = std::max(replay_blocks, groups[k].second - groups[k].first);
  }
  // Which MLPs occur at all (replay blocks serve every position of a group: they take both).
  unsigned char all_kinds = 0;
  for (int i = 0; i < layout.blocks_per_slot; ++i) all_kinds |= layout.mlp_kind(i);
  const bool any_dense = all_kinds & kDenseMlp;
  Carver cv(base);
  out.assign(static_cast<std::size_t>(layout.slots), SlotActs<T>{});
  const std::size_t kept = layout.split_backward ? layout.kept_bytes() : 0;
  for (auto& s : out) {
    s.begin = cv.here();
    s.stage_input = cv.take<T>(mul(Ns, C));
    s.blocks.resize(static_cast<std::size_t>(layout.blocks_per_slot));
    for (std::size_t i = 0; i < s.blocks.size(); ++i) {
      const int k = group_of[i];
      if (k < 0) take_block(cv, d, s.blocks[i], !selective, layout.mlp_kind(static_cast<int>(i)), layout.qk_norm);
      else if (static_cast<int>(i) == groups[static_cast<std::size_t>(k)].second - 1) s.blocks[i].res2 = cv.take<T>(mul(Ns, C));
    }
    if (layout.head) {
      s.lnf_mean = cv.take<float>(Ns);
      s.lnf_rstd = cv.take<float>(Ns);
      s.lnf = cv.take<T>(mul(N, C));
      s.logits = cv.take<T>(mul(N, d.Vl));
      s.row_max = cv.take<float>(N);
      s.row_sum = cv.take<float>(N);
      s.lse = cv.take<float>(N);
      s.target_logit = cv.take<float>(N);
    }
    s.kept = kept ? cv.take<char>(kept) : nullptr;
    s.kept_bytes = kept;
    s.end = cv.here();
  }
  scratch.dres = cv.take<T>(mul(Ns, C));
  scratch.rows_full = cv.take<T>(mul(N, C));
  scratch.rows_shard = cv.take<T>(mul(Ns, C));
  scratch.dln = cv.take<T>(mul(N, C));
  scratch.datty = cv.take<T>(mul(N, Cl));
  scratch.dqkv = cv.take<T>(mul(N, static_cast<std::size_t>(d.QKVl())));
  scratch.dfch = any_dense ? cv.take<T>(mul(N, static_cast<std::size_t>(d.Hl()))) : nullptr;
  scratch.dfch2 = any_dense ? cv.take<T>(mul(N, Fl)) : nullptr;
  const std::size_t heads_width = static_cast<std::size_t>(std::max(d.NHl, d.NKVl)) * static_cast<std::size_t>(d.HD());
  scratch.qk_out = layout.qk_norm ? cv.take<T>(mul(N, heads_width)) : nullptr;
  scratch.qk_dy = layout.qk_norm ? cv.take<T>(mul(N, heads_width)) : nullptr;
  // Fused attention's scratch; ring attention's steps need a (NHl,2,T/2,T/2) block of scores and
  // their gradient.
  const std::size_t fused = kernels::attention_scratch_floats(d.B, d.T, d.NHl);
  const std::size_t ring = d.cp > 1 ? mul(mul(static_cast<std::size_t>(d.NHl) * 2, Tn / 2), Tn / 2) : 0;
  scratch.dtt = cv.take<float>(std::max(fused, ring));
  scratch.dloss = cv.take<float>(N);
  const std::size_t ring_row = static_cast<std::size_t>(2 * d.NKVl * d.HD());
  for (int i = 0; i < 2; ++i) {
    scratch.ring_kv[i] = d.cp > 1 ? cv.take<T>(mul(N, ring_row)) : nullptr;
    scratch.ring_dkv[i] = d.cp > 1 ? cv.take<float>(mul(N, ring_row)) : nullptr;
  }
  scratch.ring_acc = d.cp > 1 ? cv.take<float>(mul(N, Cl)) : nullptr;
  // fp32 partial sums of row-parallel outputs and column-parallel input gradients: only a bf16 run with
  // tensor parallelism reduces them, or with MoE blocks, whose experts always leave partials;
  // otherwise the GEMMs write rows of T directly (GptModel's direct()).
  const bool wide_partials = !std::is_same_v<T, float> && (d.tp > 1 || (all_kinds & kMoeMlp));
  scratch.partial = wide_partials ? cv.take<float>(mul(N, C)) : nullptr;
  scratch.partial_shard = wide_partials ? cv.take<float>(mul(Ns, C)) : nullptr;
  scratch.replay.assign(static_cast<std::size_t>(replay_blocks), BlockActs<T>{});
  for (auto& b : scratch.replay) take_block(cv, d, b, true, all_kinds, layout.qk_norm);
  scratch.fch_gelu = selective && any_dense ? cv.take<T>(mul(N, Fl)) : nullptr;
  if (all_kinds & kMoeMlp) take_moe_scratch(cv, d, scratch.moe);
  const bool fp8 = layout.precision == Precision::fp8;
  const std::size_t widest_out = std::max<std::size_t>({static_cast<std::size_t>(d.QKVl()), C, static_cast<std::size_t>(d.Hl())});
  const std::size_t widest_weight = mul(std::max<std::size_t>(static_cast<std::size_t>(d.QKVl()), static_cast<std::size_t>(d.Hl())), C);
  for (std::uint8_t** codes : {&scratch.fp8_x, &scratch.fp8_x_t})
    *codes = fp8 ? cv.take<std::uint8_t>(mul(N, std::max<std::size_t>({C, Cl, Fl}))) : nullptr;  // proj's input is Cl wide
  for (std::uint8_t** codes : {&scratch.fp8_w, &scratch.fp8_w_t}) *codes = fp8 ? cv.take<std::uint8_t>(widest_weight) : nullptr;
  for (std::uint8_t** codes : {&scratch.fp8_dy, &scratch.fp8_dy_t}) *codes = fp8 ? cv.take<std::uint8_t>(mul(N, widest_out)) : nullptr;
  scratch.fp8_amax = fp8 ? cv.take<float>(3) : nullptr;
  // The pointers of recomputed tensors lead into the scratch: a group's blocks into the replay blocks
  // (the last one keeps its own output), a selective block's activation into the selective buffer.
  for (auto& s : out)
    for (std::size_t i = 0; i < s.blocks.size(); ++i) {
      BlockActs<T>& b = s.blocks[i];
      const int k = group_of[i];
      if (k >= 0) {
        T* kept = b.res2;
        b = scratch.replay[i - static_cast<std::size_t>(groups[static_cast<std::size_t>(k)].first)];
        if (kept) b.res2 = kept;
      } else if (selective) {
        b.fch_gelu = scratch.fch_gelu;
      }
    }
  return cv.used();
}

template std::size_t carve_activations<float>(void*, const ActivationLayout&, std::vector<SlotActs<float>>&, Scratch<float>&);
template std::size_t carve_activations<bf16>(void*, const ActivationLayout&, std::vector<SlotActs<bf16>>&, Scratch<bf16>&);
template std::size_t carve_activations<fp16>(void*, const ActivationLayout&, std::vector<SlotActs<fp16>>&, Scratch<fp16>&);

namespace {

// Every slot has the same size: count one slot and the shared scratch, then multiply.
template <typename T>
std::size_t layout_bytes(const ActivationLayout& layout) {
  std::vector<SlotActs<T>> slots;
  Scratch<T> scratch{};
  ActivationLayout counting = layout;
  counting.slots = layout.slots > 0 ? 1 : 0;
  const std::size_t one = carve_activations<T>(nullptr, counting, slots, scratch);
  counting.slots = 0;
  const std::size_t shared = carve_activations<T>(nullptr, counting, slots, scratch);
  const std::size_t all = mul(one - shared, static_cast<std::size_t>(layout.slots));
  return all > kMax - shared ? kMax : all + shared;
}

}  // namespace

namespace {

template <typename T>
std::size_t layout_kept_bytes(const ActivationLayout& layout) {
  const ActivationDims& d = layout.dims;
  const std::size_t N = static_cast<std::size_t>(d.N()), C = d.C, t = sizeof(T);
  const std::size_t Re = static_cast<std::size_t>(d.Re());
  std::size_t total = 0;
  const auto piece = [&](std::size_t elements, std::size_t size) {
    const std::size_t bytes = mul(elements, size);
    total += bytes > kMax - 63 ? kMax : (bytes + 63) / 64 * 64;
    total = std::min(total, kMax);
  };
  std::vector<char> in_group(static_cast<std::size_t>(layout.blocks_per_slot), 0);
  for (const auto& [begin, end] : layout.recompute_groups())
    for (int i = begin; i < end; ++i) in_group[static_cast<std::size_t>(i)] = 1;
  const bool selective = layout.recompute == RecomputeGranularity::selective;
  for (int i = 0; i < layout.blocks_per_slot; ++i) {
    const bool group = in_group[static_cast<std::size_t>(i)];
    const unsigned char kinds = layout.mlp_kind(i);
    piece(mul(N, C), t);                                   // proj: its output gradient
    piece(mul(N, static_cast<std::size_t>(d.QKVl())), t);  // qkv: its output gradient
    if (group) piece(mul(N, d.Cl), t), piece(mul(N, C), t);  // their inputs, recomputed
    if (kinds & kDenseMlp) {
      piece(mul(N, C), t), piece(mul(N, static_cast<std::size_t>(d.Hl())), t);  // fcproj, fc: output gradients
      if (selective || group) piece(mul(N, d.Fl), t);                          // fcproj's input, recomputed
      if (group) piece(mul(N, C), t);                                           // fc's
    }
    if (kinds & kMoeMlp) {
      piece(mul(N, static_cast<std::size_t>(d.E)), sizeof(float));  // the router's logit gradients
      if (!std::is_same_v<T, float>) piece(mul(N, C), sizeof(float));  // its input widened to fp32
      else if (group) piece(mul(N, C), t);
      // Each local expert's output gradients (fcproj, fc) and inputs where not in the slot, every row
      // routed here at most; a 64-byte piece per expert and operand at most rounds them up.
      std::size_t rows = mul(Re, C + static_cast<std::size_t>(d.He()));
      if (d.ep > 1 || group) rows += mul(Re, C);
      if (group) rows += mul(Re, d.Fe);
      piece(rows, t);
      piece(mul(static_cast<std::size_t>(d.E) * 4, 64), 1);
    }
  }
  piece(mul(N, C), t);  // the embedding's output gradient (first stage)
  return total;
}

}  // namespace

std::size_t ActivationLayout::kept_bytes() const {
  return is_16bit(precision) ? layout_kept_bytes<bf16>(*this) : layout_kept_bytes<float>(*this);
}

std::size_t ActivationLayout::bytes() const {
  return is_16bit(precision) ? layout_bytes<bf16>(*this) : layout_bytes<float>(*this);  // fp16's sizes are bf16's
}

}  // namespace dtrain
