// parse_cluster / format_cluster: the [cluster] keys through Boost.ProgramOptions, as input.ini's.
#include "plan/cluster.hpp"

#include <boost/program_options.hpp>

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/error.hpp"
#include "config/load.hpp"
#include "config/po_error.hpp"

namespace po = boost::program_options;

namespace dtrain {
namespace {

struct RawCluster {
  std::string name, gemm_efficiency, gemm_efficiency_by_width;
  ComputeDevice device = ComputeDevice::cuda;  // parsed by the config's own reader of cpu|cuda
  int nodes = 0, devices_per_node = 0;
  double peak_tflops_fp32 = 0, peak_tflops_bf16 = 0, memory_gb = 0, memory_bandwidth_gb_s = 0, elementwise_gb_s = 0,
         released_memory_gb_s = 0, attention_score_ns = 0, host_link_gb_s = 0, host_memory_bandwidth_gb_s = 0;
  double intra_bw = 0, intra_lat = 0, inter_bw = 0, inter_lat = 0, intra_ar = 0, inter_ar = 0, intra_rs = 0, inter_rs = 0;
};

po::options_description cluster_keys(RawCluster& r) {
  po::options_description d;
  d.add_options()("cluster.name", po::value(&r.name))("cluster.device", po::value(&r.device))(
      "cluster.nodes", po::value(&r.nodes)->required())("cluster.devices_per_node", po::value(&r.devices_per_node)->required())(
      "cluster.peak_tflops_fp32", po::value(&r.peak_tflops_fp32)->required())(
      "cluster.peak_tflops_bf16", po::value(&r.peak_tflops_bf16)->required())("cluster.memory_gb", po::value(&r.memory_gb)->required())(
      "cluster.memory_bandwidth_gb_s", po::value(&r.memory_bandwidth_gb_s)->required())(
      "cluster.elementwise_gb_s", po::value(&r.elementwise_gb_s))(
      "cluster.released_memory_gb_s", po::value(&r.released_memory_gb_s))(
      "cluster.attention_score_ns", po::value(&r.attention_score_ns))(
      "cluster.host_link_gb_s", po::value(&r.host_link_gb_s))(
      "cluster.host_memory_bandwidth_gb_s", po::value(&r.host_memory_bandwidth_gb_s))(
      "cluster.gemm_efficiency", po::value(&r.gemm_efficiency)->required())(
      "cluster.gemm_efficiency_by_width", po::value(&r.gemm_efficiency_by_width))(
      "cluster.intra_node_bandwidth_gb_s", po::value(&r.intra_bw)->required())(
      "cluster.intra_node_latency_us", po::value(&r.intra_lat)->required())(
      "cluster.inter_node_bandwidth_gb_s", po::value(&r.inter_bw)->required())(
      "cluster.inter_node_latency_us", po::value(&r.inter_lat)->required())(
      "cluster.intra_node_all_reduce_gb_s", po::value(&r.intra_ar))("cluster.inter_node_all_reduce_gb_s", po::value(&r.inter_ar))(
      "cluster.intra_node_reduce_scatter_gb_s", po::value(&r.intra_rs))("cluster.inter_node_reduce_scatter_gb_s", po::value(&r.inter_rs));
  return d;
}

// A finite number > 0 filling `text` (blanks around it allowed), or nothing.
std::optional<double> positive_number(const std::string& text) {
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (text.find_first_not_of(" \t", used) != std::string::npos || !(v > 0) || !std::isfinite(v)) return std::nullopt;
  return v;
}

// One curve: "1e6:0.3, 1e8:0.6", FLOPs ascending, efficiencies in (0, 1]; with `by_width`, each pair
// prefixed by its width, "64/1e6:0.3, 64/1e8:0.6, 128/1e6:0.4", widths ascending and each width's FLOPs
// ascending.
using Curve = std::vector<std::pair<double, double>>;
std::vector<std::pair<double, Curve>> parse_efficiency(const std::string& text, const std::string& where, bool by_width) {
  const std::string fix = where + (by_width ? ": cluster.gemm_efficiency_by_width='" : ": cluster.gemm_efficiency='") + text +
                          (by_width ? "' must be WIDTH/FLOPS:EFFICIENCY entries separated by commas, widths ascending, each "
                                      "width's FLOPs ascending, efficiencies in (0, 1] (e.g. 64/1e6:0.3, 64/1e8:0.6, 256/1e6:0.5)"
                                    : "' must be FLOPS:EFFICIENCY pairs separated by commas, FLOPs ascending, efficiencies in "
                                      "(0, 1] (e.g. 1e6:0.3, 1e8:0.6, 1e10:0.8)");
  std::vector<std::pair<double, Curve>> curves;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto colon = item.find(':'), slash = by_width ? item.find('/') : std::string::npos;
    if (colon == std::string::npos || (by_width && (slash == std::string::npos || slash > colon))) throw UserError(fix);
    const std::optional<double> width = by_width ? positive_number(item.substr(0, slash)) : std::optional<double>(0.0);
    const std::optional<double> flops = positive_number(item.substr(by_width ? slash + 1 : 0, colon - (by_width ? slash + 1 : 0)));
    const std::optional<double> eff = positive_number(item.substr(colon + 1));
    if (!width || !flops || !eff || *eff > 1 || (!curves.empty() && *width < curves.back().first)) throw UserError(fix);
    if (curves.empty() || *width > curves.back().first) curves.push_back({*width, {}});
    Curve& curve = curves.back().second;
    if (!curve.empty() && *flops <= curve.back().first) throw UserError(fix);
    curve.emplace_back(*flops, *eff);
  }
  if (curves.empty()) throw UserError(fix);
  return curves;
}

// A curve at `flops`: interpolated in log(FLOPs), held beyond the ends (1 when empty).
double on_curve(const Curve& t, double flops) {
  if (t.empty()) return 1.0;
  if (flops <= t.front().first) return t.front().second;
  if (flops >= t.back().first) return t.back().second;
  std::size_t i = 1;
  while (t[i].first < flops) ++i;
  const double x = std::log(flops), x0 = std::log(t[i - 1].first), x1 = std::log(t[i].first);
  return t[i - 1].second + (t[i].second - t[i - 1].second) * (x - x0) / (x1 - x0);
}

void print_curve(std::ostream& os, const Curve& curve, double width, bool& first) {
  for (const auto& [flops, eff] : curve) {
    os << (first ? "" : ", ");
    if (width > 0) os << width << "/";
    os << flops << ":" << eff;
    first = false;
  }
}

void check_positive(const std::string& where, const char* key, double v, bool zero_ok = false) {
  if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0))
    throw UserError(where + ": cluster." + key + "=" + std::to_string(v) + " must be a finite number " + (zero_ok ? ">= 0" : "> 0"));
}

}  // namespace

namespace {

double host_rate(const ClusterSpec& c, double given, const char* key) {
  if (given > 0) return given;
  if (c.device == ComputeDevice::cpu) return c.memory_bandwidth;
  throw UserError("cluster '" + c.name + "' gives no " + key +
                  ", which system.offload_optimizer needs on GPUs (the copies to host memory and the host's AdamW); add "
                  "cluster." + key + " (dtrain calibrate --device cuda measures it)");
}

}  // namespace

double ClusterSpec::host_link_rate() const { return host_rate(*this, host_link_bandwidth, "host_link_gb_s"); }
double ClusterSpec::host_memory_rate() const { return host_rate(*this, host_memory_bandwidth, "host_memory_bandwidth_gb_s"); }

double ClusterSpec::efficiency(double gemm_flops) const { return on_curve(gemm_efficiency, gemm_flops); }

double ClusterSpec::efficiency(double gemm_flops, double width) const {
  const auto& w = gemm_efficiency_by_width;
  if (w.empty()) return efficiency(gemm_flops);
  if (width <= w.front().first) return on_curve(w.front().second, gemm_flops);
  if (width >= w.back().first) return on_curve(w.back().second, gemm_flops);
  std::size_t i = 1;
  while (w[i].first < width) ++i;
  const double e0 = on_curve(w[i - 1].second, gemm_flops), e1 = on_curve(w[i].second, gemm_flops);
  const double x = std::log(width), x0 = std::log(w[i - 1].first), x1 = std::log(w[i].first);
  return e0 + (e1 - e0) * (x - x0) / (x1 - x0);
}

ClusterSpec parse_cluster(const std::string& text, const std::string& name) {
  RawCluster r;
  const po::options_description keys = cluster_keys(r);
  try {
    std::istringstream in(text);
    const auto parsed = po::parse_config_file(in, keys, /*allow_unregistered=*/true);
    std::vector<std::string> known;
    for (const auto& o : keys.options()) known.push_back(o->long_name());
    for (const auto& o : parsed.options)
      if (o.unregistered) {
        const std::string hint = did_you_mean(o.string_key, known);
        throw UserError(name + ": unknown key '" + o.string_key + "'" + (hint.empty() ? "" : " (did you mean '" + hint + "'?)") +
                        "; a cluster description has one [cluster] section (see inputs/clusters/)");
      }
    po::variables_map vm;
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::required_option& e) {
    std::string key = e.get_option_name();
    key.erase(0, key.find_first_not_of('-'));
    throw UserError(name + ": the key '" + key + "' is missing; add it (every key of inputs/clusters/dgx-h100.ini is required; name, device and the measured rates elementwise_gb_s, released_memory_gb_s, attention_score_ns, gemm_efficiency_by_width, host_link_gb_s, host_memory_bandwidth_gb_s, *_all_reduce_gb_s, *_reduce_scatter_gb_s are optional)");
  } catch (const po::invalid_config_file_syntax& e) {
    throw UserError(name + ": malformed line (" + program_options_error(e, /*ini_keys=*/true) + "); expected '[cluster]' or 'key = value'");
  } catch (const po::error& e) {
    throw UserError(name + ": " + program_options_error(e, /*ini_keys=*/true));
  }
  ClusterSpec c;
  c.name = r.name.empty() ? name : r.name;
  c.device = r.device;
  if (r.nodes < 1 || r.devices_per_node < 1 || static_cast<long>(r.nodes) * r.devices_per_node > (1L << 24))
    throw UserError(name + ": cluster.nodes=" + std::to_string(r.nodes) + " x cluster.devices_per_node=" +
                    std::to_string(r.devices_per_node) + " must be between 1 and 2^24 devices");
  c.nodes = r.nodes;
  c.devices_per_node = r.devices_per_node;
  check_positive(name, "peak_tflops_fp32", r.peak_tflops_fp32);
  check_positive(name, "peak_tflops_bf16", r.peak_tflops_bf16);
  check_positive(name, "memory_gb", r.memory_gb);
  check_positive(name, "memory_bandwidth_gb_s", r.memory_bandwidth_gb_s);
  check_positive(name, "elementwise_gb_s", r.elementwise_gb_s, true);
  check_positive(name, "attention_score_ns", r.attention_score_ns, true);
  check_positive(name, "host_link_gb_s", r.host_link_gb_s, true);
  check_positive(name, "host_memory_bandwidth_gb_s", r.host_memory_bandwidth_gb_s, true);
  check_positive(name, "released_memory_gb_s", r.released_memory_gb_s, true);
  check_positive(name, "intra_node_bandwidth_gb_s", r.intra_bw);
  check_positive(name, "inter_node_bandwidth_gb_s", r.inter_bw);
  check_positive(name, "intra_node_latency_us", r.intra_lat, true);
  check_positive(name, "intra_node_all_reduce_gb_s", r.intra_ar, true);
  check_positive(name, "inter_node_all_reduce_gb_s", r.inter_ar, true);
  check_positive(name, "intra_node_reduce_scatter_gb_s", r.intra_rs, true);
  check_positive(name, "inter_node_reduce_scatter_gb_s", r.inter_rs, true);
  check_positive(name, "inter_node_latency_us", r.inter_lat, true);
  c.peak_fp32 = r.peak_tflops_fp32 * 1e12;
  c.peak_bf16 = r.peak_tflops_bf16 * 1e12;
  c.memory = r.memory_gb * 1e9;
  c.memory_bandwidth = r.memory_bandwidth_gb_s * 1e9;
  c.elementwise_bandwidth = r.elementwise_gb_s * 1e9;
  c.attention_score_seconds = r.attention_score_ns * 1e-9;
  c.host_link_bandwidth = r.host_link_gb_s * 1e9;
  c.host_memory_bandwidth = r.host_memory_bandwidth_gb_s * 1e9;
  c.release_bandwidth = r.released_memory_gb_s * 1e9;
  c.gemm_efficiency = parse_efficiency(r.gemm_efficiency, name, false).front().second;
  if (!r.gemm_efficiency_by_width.empty()) c.gemm_efficiency_by_width = parse_efficiency(r.gemm_efficiency_by_width, name, true);
  c.intra_node = {r.intra_bw * 1e9, r.intra_lat * 1e-6, r.intra_ar * 1e9, r.intra_rs * 1e9};
  c.inter_node = {r.inter_bw * 1e9, r.inter_lat * 1e-6, r.inter_ar * 1e9, r.inter_rs * 1e9};
  return c;
}

ClusterSpec load_cluster_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UserError("cannot read cluster description '" + path + "'; give --cluster FILE (see inputs/clusters/)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_cluster(ss.str(), path);
}

std::string format_cluster(const ClusterSpec& c) {
  std::ostringstream os;
  os.precision(17);
  os << "[cluster]\nname = " << c.name << "\ndevice = " << c.device
     << "\nnodes = " << c.nodes << "\ndevices_per_node = " << c.devices_per_node << "\npeak_tflops_fp32 = " << c.peak_fp32 / 1e12
     << "\npeak_tflops_bf16 = " << c.peak_bf16 / 1e12 << "\nmemory_gb = " << c.memory / 1e9
     << "\nmemory_bandwidth_gb_s = " << c.memory_bandwidth / 1e9 << "\ngemm_efficiency = ";
  bool first = true;
  print_curve(os, c.gemm_efficiency, 0, first);
  if (!c.gemm_efficiency_by_width.empty()) {
    os << "\ngemm_efficiency_by_width = ";
    first = true;
    for (const auto& [width, curve] : c.gemm_efficiency_by_width) print_curve(os, curve, width, first);
  }
  if (c.elementwise_bandwidth > 0) os << "\nelementwise_gb_s = " << c.elementwise_bandwidth / 1e9;
  if (c.attention_score_seconds > 0) os << "\nattention_score_ns = " << c.attention_score_seconds * 1e9;
  if (c.host_link_bandwidth > 0) os << "\nhost_link_gb_s = " << c.host_link_bandwidth / 1e9;
  if (c.host_memory_bandwidth > 0) os << "\nhost_memory_bandwidth_gb_s = " << c.host_memory_bandwidth / 1e9;
  if (c.release_bandwidth > 0) os << "\nreleased_memory_gb_s = " << c.release_bandwidth / 1e9;
  os << "\nintra_node_bandwidth_gb_s = " << c.intra_node.bandwidth / 1e9 << "\nintra_node_latency_us = " << c.intra_node.latency * 1e6
     << "\ninter_node_bandwidth_gb_s = " << c.inter_node.bandwidth / 1e9 << "\ninter_node_latency_us = " << c.inter_node.latency * 1e6;
  if (c.intra_node.all_reduce_bandwidth > 0) os << "\nintra_node_all_reduce_gb_s = " << c.intra_node.all_reduce_bandwidth / 1e9;
  if (c.inter_node.all_reduce_bandwidth > 0) os << "\ninter_node_all_reduce_gb_s = " << c.inter_node.all_reduce_bandwidth / 1e9;
  if (c.intra_node.reduce_scatter_bandwidth > 0)
    os << "\nintra_node_reduce_scatter_gb_s = " << c.intra_node.reduce_scatter_bandwidth / 1e9;
  if (c.inter_node.reduce_scatter_bandwidth > 0)
    os << "\ninter_node_reduce_scatter_gb_s = " << c.inter_node.reduce_scatter_bandwidth / 1e9;
  os << "\n";
  return os.str();
}

}  // namespace dtrain
