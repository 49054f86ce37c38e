// schedule_bubbles: the schedule simulator's bubble (plan/pipeline_schedule's simulate_schedule, F = B
// = W per chunk, the zero-bubble paper's convention) of 1F1B, interleaved 1F1B (v = 2), zb-h1 and zbv
// for p = 4, 8, 16 stages and m = 2p, 4p micro-batches, beside the closed forms: 1F1B's (p-1)/(m+p-1),
// interleaved's (p-1)/(2m+p-1), the paper's ZB-H1 (p-1)(F+B-W) = (p-1)/(3m+p-1) of the step (Qi et al.,
// "Zero Bubble Pipeline Parallelism", ICLR 2024, section 3 and Table 2; its ZB-V reaches ZB-H2's
// (p-1)(F+B-2W) = 0 at 1F1B's memory), and a lower bound for any V placement: stage p-1 cannot start
// before p-1 chunk-forwards have run, so at least (p-1) of its 6m + p - 1 units are idle. Prints a
// table and writes JSON.
//   build/tools/bench/schedule_bubbles [--json FILE]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "plan/pipeline_schedule.hpp"

using namespace dtrain;

int main(int argc, char** argv) {
  std::string json = "schedule_bubbles.json";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--json") == 0 && i + 1 < argc) {
      json = argv[++i];
    } else {
      std::fprintf(stderr, "usage: schedule_bubbles [--json FILE]\n");
      return 2;
    }
  }
  std::printf("simulated bubble (F = B = W), beside the closed forms; zbv's lower bound (p-1)/(6m+p-1)\n");
  std::printf("%4s %5s | %8s %8s | %11s %8s | %8s %8s | %8s %8s | %9s\n", "p", "m", "1f1b", "formula", "interleaved", "formula", "zb-h1",
              "paper", "zbv", "bound", "zbv/1f1b");
  std::string rows;
  for (int p : {4, 8, 16})
    for (int m : {2 * p, 4 * p}) {
      const double f1 = predicted_bubble(PipelineSchedule::one_f_one_b, p, m, 1);
      const double il = predicted_bubble(PipelineSchedule::interleaved, p, m, 2);
      const double h1 = predicted_bubble(PipelineSchedule::zb_h1, p, m, 1);
      const double zv = predicted_bubble(PipelineSchedule::zbv, p, m, 2);
      // 1F1B and interleaved through the simulator too (predicted_bubble is their formula).
      std::vector<StageActions> one, inter;
      for (int s = 0; s < p; ++s) {
        one.push_back(schedule_actions(PipelineSchedule::one_f_one_b, p, m, 1, s));
        inter.push_back(schedule_actions(PipelineSchedule::interleaved, p, m, 2, s));
      }
      const SimulationResult r1 = simulate_schedule(one, PipelineSchedule::one_f_one_b, m, 1, ActionCosts{});
      const SimulationResult ri = simulate_schedule(inter, PipelineSchedule::interleaved, m, 2, ActionCosts{});
      const double s1 = r1.idle[0] / r1.makespan, si = ri.idle[0] / ri.makespan;
      const double paper_h1 = (p - 1.0) / (3.0 * m + p - 1), bound = (p - 1.0) / (6.0 * m + p - 1);
      std::printf("%4d %5d | %7.2f%% %7.2f%% | %10.2f%% %7.2f%% | %7.2f%% %7.2f%% | %7.2f%% %7.2f%% | %8.3fx\n", p, m, 100 * s1, 100 * f1,
                  100 * si, 100 * il, 100 * h1, 100 * paper_h1, 100 * zv, 100 * bound, zv / s1);
      char row[512];
      std::snprintf(row, sizeof row,
                    "{\"p\": %d, \"m\": %d, \"1f1b\": %.6f, \"1f1b_formula\": %.6f, \"interleaved_v2\": %.6f, \"interleaved_formula\": %.6f, "
                    "\"zb_h1\": %.6f, \"zb_h1_paper\": %.6f, \"zbv\": %.6f, \"zbv_lower_bound\": %.6f}",
                    p, m, s1, f1, si, il, h1, paper_h1, zv, bound);
      rows += (rows.empty() ? "" : ",\n ") + std::string(row);
    }
  FILE* f = std::fopen(json.c_str(), "w");
  if (!f) {
    std::perror(json.c_str());
    return 1;
  }
  std::fprintf(f, "{\"costs\": \"F = B = W per chunk\", \"rows\": [\n %s]}\n", rows.c_str());
  std::fclose(f);
  std::printf("wrote %s\n", json.c_str());
  return 0;
}
