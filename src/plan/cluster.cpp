// parse_cluster / format_cluster: the [cluster] keys through Boost.ProgramOptions, as input.ini's.
#include "plan/cluster.hpp"

#include <boost/program_options.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/error.hpp"
#include "config/load.hpp"

namespace po = boost::program_options;

namespace dtrain {
namespace {

struct RawCluster {
  std::string name, gemm_efficiency;
  ComputeDevice device = ComputeDevice::cuda;  // parsed by the config's own reader of cpu|cuda
  int nodes = 0, devices_per_node = 0;
  double peak_tflops_fp32 = 0, peak_tflops_bf16 = 0, memory_gb = 0, memory_bandwidth_gb_s = 0, elementwise_gb_s = 0,
         released_memory_gb_s = 0;
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
      "cluster.gemm_efficiency", po::value(&r.gemm_efficiency)->required())(
      "cluster.intra_node_bandwidth_gb_s", po::value(&r.intra_bw)->required())(
      "cluster.intra_node_latency_us", po::value(&r.intra_lat)->required())(
      "cluster.inter_node_bandwidth_gb_s", po::value(&r.inter_bw)->required())(
      "cluster.inter_node_latency_us", po::value(&r.inter_lat)->required())(
      "cluster.intra_node_all_reduce_gb_s", po::value(&r.intra_ar))("cluster.inter_node_all_reduce_gb_s", po::value(&r.inter_ar))(
      "cluster.intra_node_reduce_scatter_gb_s", po::value(&r.intra_rs))("cluster.inter_node_reduce_scatter_gb_s", po::value(&r.inter_rs));
  return d;
}

std::string rephrase(const po::error& e) {
  std::string what = e.what();
  for (std::string::size_type p; (p = what.find("'--")) != std::string::npos;) what.erase(p + 1, 2);
  return what;
}

// "1e6:0.3, 1e8:0.6": FLOPs ascending, efficiencies in (0, 1].
std::vector<std::pair<double, double>> parse_efficiency(const std::string& text, const std::string& where) {
  const std::string fix = where + ": cluster.gemm_efficiency='" + text +
                          "' must be FLOPS:EFFICIENCY pairs separated by commas, FLOPs ascending, efficiencies in (0, 1] "
                          "(e.g. 1e6:0.3, 1e8:0.6, 1e10:0.8)";
  std::vector<std::pair<double, double>> table;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    const auto colon = item.find(':');
    if (colon == std::string::npos) throw UserError(fix);
    std::size_t used_f = 0, used_e = 0;
    double flops = 0, eff = 0;
    try {
      flops = std::stod(item.substr(0, colon), &used_f);
      eff = std::stod(item.substr(colon + 1), &used_e);
    } catch (const std::exception&) {
      throw UserError(fix);
    }
    const auto rest = [](const std::string& s, std::size_t from) { return s.find_first_not_of(" \t", from) == std::string::npos; };
    const std::string f = item.substr(0, colon), e = item.substr(colon + 1);
    if (!rest(f, used_f) || !rest(e, used_e) || !(flops > 0) || !std::isfinite(flops) || !(eff > 0) || eff > 1 ||
        (!table.empty() && flops <= table.back().first))
      throw UserError(fix);
    table.emplace_back(flops, eff);
  }
  if (table.empty()) throw UserError(fix);
  return table;
}

void check_positive(const std::string& where, const char* key, double v, bool zero_ok = false) {
  if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0))
    throw UserError(where + ": cluster." + key + "=" + std::to_string(v) + " must be a finite number " + (zero_ok ? ">= 0" : "> 0"));
}

}  // namespace

double ClusterSpec::efficiency(double gemm_flops) const {
  const auto& t = gemm_efficiency;
  if (t.empty()) return 1.0;
  if (gemm_flops <= t.front().first) return t.front().second;
  if (gemm_flops >= t.back().first) return t.back().second;
  std::size_t i = 1;
  while (t[i].first < gemm_flops) ++i;
  const double x = std::log(gemm_flops), x0 = std::log(t[i - 1].first), x1 = std::log(t[i].first);
  return t[i - 1].second + (t[i].second - t[i - 1].second) * (x - x0) / (x1 - x0);
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
    throw UserError(name + ": the key '" + key + "' is missing; add it (every key of inputs/clusters/dgx-h100.ini is required; name, device and the measured rates elementwise_gb_s, released_memory_gb_s, *_all_reduce_gb_s, *_reduce_scatter_gb_s are optional)");
  } catch (const po::invalid_config_file_syntax& e) {
    throw UserError(name + ": malformed line (" + rephrase(e) + "); expected '[cluster]' or 'key = value'");
  } catch (const po::error& e) {
    throw UserError(name + ": " + rephrase(e));
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
  c.release_bandwidth = r.released_memory_gb_s * 1e9;
  c.gemm_efficiency = parse_efficiency(r.gemm_efficiency, name);
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
  for (std::size_t i = 0; i < c.gemm_efficiency.size(); ++i)
    os << (i ? ", " : "") << c.gemm_efficiency[i].first << ":" << c.gemm_efficiency[i].second;
  if (c.elementwise_bandwidth > 0) os << "\nelementwise_gb_s = " << c.elementwise_bandwidth / 1e9;
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
